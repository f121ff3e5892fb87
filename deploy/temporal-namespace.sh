#!/bin/sh
# Makes the namespace vidbatch uses and registers vidbatch's search attributes in it, once the server
# answers. Run by the `temporal-setup` service (temporalio/admin-tools), where workers start only after it
# exits 0, and by `scripts/cluster.sh up` (natively).
# Re-runnable: what exists is left alone. SEARCH_ATTRIBUTES lists "Name=Type" pairs (compose sets it from the
# code's list; test/deployment.test.ts keeps the two equal).
set -eu

: "${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS is required}"
: "${SEARCH_ATTRIBUTES:?SEARCH_ATTRIBUTES is required}"
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
RETENTION=${TEMPORAL_NAMESPACE_RETENTION:-168h}

attempt=1
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" >/dev/null 2>&1; do
  if [ "$attempt" -ge 60 ]; then
    echo "Temporal at $TEMPORAL_ADDRESS is not healthy after $attempt attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done

if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE: exists"
else
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
  echo "namespace $NAMESPACE: created (retention $RETENTION)"
fi

# A namespace just created can take a moment to be visible to every service: retry each attribute briefly.
for pair in $SEARCH_ATTRIBUTES; do
  name=${pair%%=*}
  type=${pair#*=}
  attempt=1
  while :; do
    found=$(temporal operator search-attribute list --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" 2>/dev/null | grep -w "$name" || true)
    if [ -n "$found" ]; then
      # Same name, other type: the code would write values the server rejects. Stop and say so.
      echo "$found" | grep -qw "$type" || { echo "search attribute $name exists but is not $type: $found" >&2; exit 1; }
      break
    fi
    if [ "$attempt" -ge 30 ]; then
      echo "could not register search attribute $name ($type) in $NAMESPACE" >&2
      exit 1
    fi
    temporal operator search-attribute create --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" \
      --name "$name" --type "$type" >/dev/null 2>&1 || sleep 2
    attempt=$((attempt + 1))
  done
  echo "search attribute $name ($type): registered"
done
