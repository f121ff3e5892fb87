#!/usr/bin/env bash
# The self-hosted stack of docker-compose.yml, natively and without Docker, on 127.0.0.1 only: PostgreSQL
# (Debian's packages), the Temporal server 1.29.1 (built from the Go module proxy, cached) configured by
# deploy/temporal-server.yaml and deploy/dynamicconfig/, the schema by deploy/temporal-schema.sh and the
# namespace and search attributes by deploy/temporal-namespace.sh: the same files compose runs. And the
# Temporal Web UI server of compose's temporalio/ui image version, built the same way (its pages are embedded).
#
#   scripts/cluster.sh up | down | status | restart-server | restart-db | env | destroy
#
# Settings (environment):
#   VIDBATCH_CLUSTER_DIR      state: PostgreSQL data, logs, pids (default <repo>/.vidbatch/cluster, wherever
#                             the script is run from: one cluster per checkout)
#   VIDBATCH_CLUSTER_PORT     Temporal frontend gRPC port (default 27233); the server's other services use
#                             the next ports: history +1, matching +2, worker +6, HTTP +10, membership +20..+26
#   VIDBATCH_CLUSTER_PG_PORT  PostgreSQL port (default 25432)
#   VIDBATCH_CLUSTER_UI_PORT  Temporal Web UI port (default 28080)
#   TEMPORAL_NAMESPACE        namespace to create (default `default`)
#   XDG_CACHE_HOME            builds are cached in $XDG_CACHE_HOME/vidbatch (default ~/.cache/vidbatch)
# The Go toolchain (PATH or /usr/local/go/bin) is needed once, for the builds. Run it as root (CI) or as a
# user who owns the state dir; as root PostgreSQL runs as the `postgres` user.
set -euo pipefail

SERVER_VERSION=v1.29.1 # the version of docker-compose.yml's temporalio/server image
CLI_VERSION=v1.5.1     # src/dev-server/cli-binary.ts TEMPORAL_CLI_VERSION
UI_VERSION=v2.42.1     # the version of docker-compose.yml's temporalio/ui image
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STATE_REL=${VIDBATCH_CLUSTER_DIR:-$ROOT/.vidbatch/cluster}
mkdir -p "$STATE_REL"
STATE=$(cd "$STATE_REL" && pwd)
PORT=${VIDBATCH_CLUSTER_PORT:-27233}
PG_PORT=${VIDBATCH_CLUSTER_PG_PORT:-25432}
UI_PORT=${VIDBATCH_CLUSTER_UI_PORT:-28080}
NAMESPACE=${TEMPORAL_NAMESPACE:-default}
ADDRESS=127.0.0.1:$PORT
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vidbatch
SERVER_DIR=$CACHE/temporal-server/$SERVER_VERSION
UI_DIR=$CACHE/temporal-ui/$UI_VERSION
CLI=$CACHE/temporal-cli/$CLI_VERSION/temporal
export PATH="$PATH:/usr/local/go/bin"

say() { echo "cluster: $*" >&2; }
die() {
  say "error: $*"
  exit 1
}

# ---------------------------------------------------------------------------------------------- builds
go_install() { # <target dir> <packages...>: into a staging dir first, so a killed build leaves nothing half
  local target=$1
  shift
  command -v go >/dev/null || die "the Go toolchain is not installed (needed once to build $*)"
  local staging=$target.partial-$$
  rm -rf "$staging"
  mkdir -p "$staging"
  say "building $* with $(go version | cut -d' ' -f3) (first time only; several minutes)..."
  local t0=$SECONDS
  GOBIN=$staging GOFLAGS=${GOFLAGS:--mod=mod} go install "$@" >&2 || {
    rm -rf "$staging"
    die "go install $* failed"
  }
  say "built in $((SECONDS - t0)) s"
  echo "$staging"
}

ensure_server() {
  [ -x "$SERVER_DIR/temporal-server" ] && [ -x "$SERVER_DIR/temporal-sql-tool" ] && [ -d "$SERVER_DIR/schema" ] && return
  local staging module
  staging=$(go_install "$SERVER_DIR" "go.temporal.io/server/cmd/server@$SERVER_VERSION" \
    "go.temporal.io/server/cmd/tools/sql@$SERVER_VERSION")
  mv "$staging/server" "$staging/temporal-server"
  mv "$staging/sql" "$staging/temporal-sql-tool"
  # The schema files admin-tools ships under /etc/temporal/schema, from the same module version.
  module=$(go mod download -json "go.temporal.io/server@$SERVER_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [ -d "$module/schema/postgresql/v12" ] || die "no schema/postgresql/v12 in $module"
  mkdir -p "$staging/schema/postgresql"
  cp -r "$module/schema/postgresql/v12" "$staging/schema/postgresql/"
  chmod -R u+w "$staging/schema"
  rm -rf "$SERVER_DIR"
  mv "$staging" "$SERVER_DIR"
}

ensure_ui() {
  [ -x "$UI_DIR/temporal-ui-server" ] && return
  local staging
  staging=$(go_install "$UI_DIR" "github.com/temporalio/ui-server/v2/cmd/server@$UI_VERSION")
  mv "$staging/server" "$staging/temporal-ui-server"
  rm -rf "$UI_DIR"
  mv "$staging" "$UI_DIR"
}

ensure_cli() { # the same cache entry src/dev-server/cli-binary.ts provisions
  if [ -n "${TEMPORAL_CLI_PATH:-}" ] && [ -x "$TEMPORAL_CLI_PATH" ]; then
    CLI=$TEMPORAL_CLI_PATH
    return
  fi
  [ -x "$CLI" ] && return
  if command -v temporal >/dev/null; then
    CLI=$(command -v temporal)
    return
  fi
  local staging
  staging=$(go_install "$(dirname "$CLI")" "github.com/temporalio/cli/cmd/temporal@$CLI_VERSION")
  mkdir -p "$(dirname "$CLI")"
  mv "$staging/temporal" "$CLI"
  rm -rf "$staging"
}

# ---------------------------------------------------------------------------------------------- PostgreSQL
pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$dir" ]; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "PostgreSQL is not installed (apt-get install postgresql)"
    say "installing PostgreSQL from Debian's packages..."
    apt-get update -qq >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null || die "apt-get install postgresql failed"
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    [ -n "$dir" ] || die "PostgreSQL was installed but no /usr/lib/postgresql/*/bin was found"
  fi
  echo "$dir"
}

# Long-lived children must not keep the caller's descriptors: under `flock LOCK scripts/cluster.sh up` the
# lock's fd would stay open in the server (and the lock held) until the server stops.
close_fds() {
  local fd
  for fd in $(ls "/proc/$BASHPID/fd" 2>/dev/null); do
    [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
  done
  return 0
}

# PostgreSQL refuses to run as root: as root, it runs as the `postgres` user the package created.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_dir() { # the data folder's parent: under the state dir, unless root's `postgres` user cannot reach it
  local dir=$STATE/postgres
  if [ -f "$STATE/postgres.path" ]; then
    cat "$STATE/postgres.path"
    return
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then
      dir=/var/lib/postgresql/vidbatch-cluster-$(echo "$STATE" | sha256sum | cut -c1-12)
      # A new state dir: what an older one of the same path left there has another password.
      rm -rf "$dir"
      mkdir -p "$dir"
      chown postgres: "$dir"
    fi
  fi
  echo "$dir" >"$STATE/postgres.path"
  echo "$dir"
}

pg_password() {
  if [ ! -s "$STATE/postgres-password" ]; then
    (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$STATE/postgres-password")
  fi
  cat "$STATE/postgres-password"
}

pg_running() { # never installs anything: `down` and `status` only look
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$dir" ] && [ -f "$STATE/postgres.path" ] && as_pg "$dir/pg_ctl" status -D "$(pg_dir)/data" >/dev/null 2>&1
}

pg_start() {
  local bin dir
  bin=$(pg_bin)
  dir=$(pg_dir)
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    say "initdb in $dir/data"
    local pw=$dir/initdb-password
    (umask 077 && pg_password >"$pw")
    [ "$(id -u)" = 0 ] && chown postgres: "$pw"
    as_pg "$bin/initdb" -D "$dir/data" -U temporal --pwfile="$pw" --auth-host=scram-sha-256 \
      --auth-local=peer -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 || die "initdb failed: $(tail -5 "$dir/initdb.log")"
    rm -f "$pw"
    echo "include 'vidbatch.conf'" | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
  fi
  # Rewritten at every start so the port follows VIDBATCH_CLUSTER_PG_PORT; the socket stays in our folder.
  printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nmax_connections = 200\n" \
    "$PG_PORT" "$dir" | as_pg tee "$dir/data/vidbatch.conf" >/dev/null
  pg_running && return
  say "starting PostgreSQL on 127.0.0.1:$PG_PORT"
  (close_fds && as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start >/dev/null) ||
    die "PostgreSQL did not start: $(tail -5 "$dir/postgres.log")"
}

pg_stop() {
  pg_running || return 0
  say "stopping PostgreSQL"
  as_pg "$(pg_bin)/pg_ctl" -D "$(pg_dir)/data" -m fast -w -t 60 stop >/dev/null
}

# ---------------------------------------------------------------------------------------------- Temporal
server_env() { # the variables compose gives the temporalio/server image, with this script's ports
  export DB=postgres12 POSTGRES_SEEDS=127.0.0.1 DB_PORT=$PG_PORT POSTGRES_USER=temporal
  POSTGRES_PWD=$(pg_password)
  export POSTGRES_PWD BIND_ON_IP=127.0.0.1 TEMPORAL_BROADCAST_ADDRESS=127.0.0.1
  export FRONTEND_GRPC_PORT=$PORT HISTORY_GRPC_PORT=$((PORT + 1)) MATCHING_GRPC_PORT=$((PORT + 2))
  export WORKER_GRPC_PORT=$((PORT + 6)) FRONTEND_HTTP_PORT=$((PORT + 10))
  export FRONTEND_MEMBERSHIP_PORT=$((PORT + 20)) HISTORY_MEMBERSHIP_PORT=$((PORT + 21))
  export MATCHING_MEMBERSHIP_PORT=$((PORT + 22)) WORKER_MEMBERSHIP_PORT=$((PORT + 26))
  export DYNAMIC_CONFIG_FILE_PATH=$ROOT/deploy/dynamicconfig/vidbatch.yaml
}

running_pid() { # <pid file> <program>: the pid it names while that program runs under it, else nothing
  local pid
  pid=$(cat "$1" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && grep -q "$2" "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
  return 0
}

server_pid() { running_pid "$STATE/temporal.pid" temporal-server; }

# While a program starts: whether the process just started is alive. Until its subshell has run `exec`, its
# cmdline is still the shell's, so running_pid would take a starting program for one that exited.
started_alive() { kill -0 "$(cat "$1" 2>/dev/null || echo 0)" 2>/dev/null; }

healthy() { "$CLI" operator cluster health --address "$ADDRESS" >/dev/null 2>&1; }

server_start() {
  [ -n "$(server_pid)" ] && return
  say "starting Temporal server $SERVER_VERSION on $ADDRESS (log: $STATE/temporal.log)"
  (
    server_env
    close_fds
    cd "$ROOT"
    exec setsid "$SERVER_DIR/temporal-server" --root "$ROOT" --config deploy --env temporal-server \
      --allow-no-auth start >>"$STATE/temporal.log" 2>&1 </dev/null
  ) &
  echo $! >"$STATE/temporal.pid"
}

server_stop() {
  local pid
  pid=$(server_pid)
  [ -z "$pid" ] && return
  say "stopping Temporal server (pid $pid)"
  kill -TERM "$pid"
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  rm -f "$STATE/temporal.pid"
}

wait_healthy() {
  local t0=$SECONDS
  until healthy; do
    started_alive "$STATE/temporal.pid" || die "the Temporal server exited: $(tail -20 "$STATE/temporal.log")"
    [ $((SECONDS - t0)) -lt "${1:-180}" ] || die "Temporal at $ADDRESS not healthy after ${1:-180} s"
    sleep 1
  done
}

schema() {
  server_env
  SQL_USER=temporal SQL_PASSWORD=$POSTGRES_PWD SCHEMA_ROOT=$SERVER_DIR/schema/postgresql/v12 \
    PATH="$SERVER_DIR:$PATH" sh "$ROOT/deploy/temporal-schema.sh" >>"$STATE/setup.log" 2>&1 ||
    die "deploy/temporal-schema.sh failed: $(tail -5 "$STATE/setup.log")"
}

namespace() {
  # The search attributes compose passes (test/deployment.test.ts keeps them equal to the code's).
  local attrs
  attrs=$(sed -n 's/^ *SEARCH_ATTRIBUTES: //p' "$ROOT/docker-compose.yml")
  [ -n "$attrs" ] || die "no SEARCH_ATTRIBUTES in docker-compose.yml"
  mkdir -p "$STATE/bin"
  ln -sf "$CLI" "$STATE/bin/temporal"
  TEMPORAL_ADDRESS=$ADDRESS TEMPORAL_NAMESPACE=$NAMESPACE SEARCH_ATTRIBUTES=$attrs PATH="$STATE/bin:$PATH" \
    sh "$ROOT/deploy/temporal-namespace.sh" >>"$STATE/setup.log" 2>&1 ||
    die "deploy/temporal-namespace.sh failed: $(tail -5 "$STATE/setup.log")"
}

# ---------------------------------------------------------------------------------------------- Web UI
ui_pid() { running_pid "$STATE/ui.pid" temporal-ui-server; }

ui_start() { # what compose's temporal-ui service is given: the frontend's address, a port on 127.0.0.1
  [ -n "$(ui_pid)" ] && return
  mkdir -p "$STATE/ui/config"
  printf 'temporalGrpcAddress: %s\nhost: 127.0.0.1\nport: %s\nenableUi: true\ndefaultNamespace: %s\n' \
    "$ADDRESS" "$UI_PORT" "$NAMESPACE" >"$STATE/ui/config/cluster.yaml"
  say "starting the Temporal Web UI $UI_VERSION on http://127.0.0.1:$UI_PORT (log: $STATE/ui.log)"
  (
    close_fds
    exec setsid "$UI_DIR/temporal-ui-server" --root "$STATE/ui" --config config --env cluster start \
      >>"$STATE/ui.log" 2>&1 </dev/null
  ) &
  echo $! >"$STATE/ui.pid"
  local t0=$SECONDS
  until curl -fsS -o /dev/null "http://127.0.0.1:$UI_PORT/"; do
    started_alive "$STATE/ui.pid" || die "the Web UI exited: $(tail -5 "$STATE/ui.log")"
    [ $((SECONDS - t0)) -lt 30 ] || die "the Web UI did not answer on port $UI_PORT within 30 s"
    sleep 0.5
  done
  sleep 0.5 # another program on the port answers too, and then ours exits: "address already in use"
  [ -n "$(ui_pid)" ] || die "the Web UI exited: $(tail -5 "$STATE/ui.log")"
}

ui_stop() {
  local pid
  pid=$(ui_pid)
  [ -z "$pid" ] && return
  say "stopping the Web UI (pid $pid)"
  kill -TERM "$pid"
  rm -f "$STATE/ui.pid"
}

# ---------------------------------------------------------------------------------------------- commands
up() {
  local t0=$SECONDS
  ensure_server
  ensure_ui
  ensure_cli
  pg_start
  schema
  server_start
  wait_healthy 180
  namespace
  ui_start
  say "up in $((SECONDS - t0)) s"
  echo "TEMPORAL_ADDRESS=$ADDRESS"
  echo "TEMPORAL_UI=http://127.0.0.1:$UI_PORT"
}

down() {
  ui_stop
  server_stop
  pg_stop
  say "down (data kept in $STATE; \`destroy\` removes it)"
}

status() {
  local code=0
  if pg_running; then echo "postgresql: running on 127.0.0.1:$PG_PORT"; else
    echo "postgresql: stopped"
    code=1
  fi
  if [ -n "$(server_pid)" ]; then
    if healthy; then echo "temporal: serving on $ADDRESS"; else
      echo "temporal: running (pid $(server_pid)), not healthy"
      code=1
    fi
  else
    echo "temporal: stopped"
    code=1
  fi
  if [ -n "$(ui_pid)" ]; then echo "web ui: http://127.0.0.1:$UI_PORT"; else
    echo "web ui: stopped"
    code=1
  fi
  return $code
}

case "${1:-}" in
up) up ;;
down) down ;;
status)
  ensure_cli
  status
  ;;
restart-server)
  ensure_cli
  server_stop
  server_start
  wait_healthy 180
  say "Temporal server restarted"
  ;;
restart-db)
  pg_stop
  pg_start
  say "PostgreSQL restarted"
  ;;
env)
  echo "TEMPORAL_ADDRESS=$ADDRESS"
  echo "TEMPORAL_UI=http://127.0.0.1:$UI_PORT"
  ;;
destroy)
  down
  dir=$(pg_dir)
  rm -rf "$dir" "$STATE"
  say "removed $STATE"
  ;;
*)
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
  ;;
esac
