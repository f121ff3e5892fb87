#!/usr/bin/env bash
# A real `vidbatch worker` whose output root holds N earlier batches of M rows (bench/request-index.ts writes
# them), running a new 10-row batch in that root: the worker's peak RSS (VmHWM, Rust core included) and how long
# `run` took, its first page reading the whole request index. Everything on loopback; run from the repository
# root:   bash bench/request-index-worker.sh [batches] [rows]
set -euo pipefail
batches=${1:-10}
rows=${2:-100000}
repo=$(pwd)
cli="node $repo/bin/vidbatch.mjs"
dir=$(mktemp -d /tmp/vidbatch-index-worker-XXXX)
root=$dir/out
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

npx tsx bench/request-index.ts --batches "$batches" --rows "$rows" --root "$root" >"$dir/bench.json"
cd "$dir"
waitfor() { # file, pattern
  for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.2; done
  echo "timed out waiting for '$2' in $1" >&2
  cat "$1" >&2
  exit 1
}
$cli simulator --job-seconds 1 >"$dir/sim.log" 2>&1 &
pids+=($!)
waitfor "$dir/sim.log" 'GATEWAY_API_KEY='
eval "$(grep '^export GATEWAY_' "$dir/sim.log")"
mkdir -p "$dir/server"
# Its own folder, and its own pid (not a subshell's): SIGINT stops it and its Temporal dev server.
env -C "$dir/server" $cli server >"$dir/server.log" 2>&1 &
pids+=($!)
waitfor "$dir/server.log" 'Temporal gRPC address'
TEMPORAL_ADDRESS=$(sed -n 's/.*Temporal gRPC address: \([^ ]*\).*/\1/p' "$dir/server.log" | head -1)
export TEMPORAL_ADDRESS
# The earlier batches as this gateway's (target) in this root: their ids carry its scope.
scope=$(cd "$repo" && npx tsx -e "
  import { scopeDigest } from './src/client/task-queue.ts';
  import { gatewayTarget } from './src/config.ts';
  console.log(scopeDigest({ target: gatewayTarget(process.env.GATEWAY_BASE_URL!), root: '$root' }, 8));")
for d in "$root"/batch-*-0000abcd; do mv "$d" "${d%-0000abcd}-$scope"; done
VIDBATCH_OUT_ROOT=$root VIDBATCH_INPUT_ROOT=$dir $cli worker >"$dir/worker.log" 2>&1 &
worker=$!
pids+=($worker)
waitfor "$dir/worker.log" 'polling task queue'
base=$(awk '/VmRSS/ {print $2}' "/proc/$worker/status")
printf 'id,prompt\n' >small.csv
for i in $(seq 10); do printf 'n%d,a new prompt number %d for the index bench\n' "$i" "$i" >>small.csv; done
started=$(date +%s.%N)
$cli run small.csv --out-root "$root" --first-poll 1 --poll-interval 1 >"$dir/run.log" 2>&1 || {
  cat "$dir/run.log" >&2
  exit 1
}
ended=$(date +%s.%N)
peak=$(awk '/VmHWM/ {print $2}' "/proc/$worker/status")
now=$(awk '/VmRSS/ {print $2}' "/proc/$worker/status")
echo "{\"batches\":$batches,\"rows\":$rows,\"workerRssAtStartMB\":$((base / 1024)),\"workerPeakRssMB\":$((peak / 1024)),\"workerRssAfterMB\":$((now / 1024)),\"runSeconds\":$(echo "$ended - $started" | bc)}"
