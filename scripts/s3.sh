#!/usr/bin/env bash
# An S3-compatible server for the tests and for trying VIDBATCH_STORE on one machine: versitygw (Apache-2.0),
# built from the Go module proxy into the cache the Temporal binaries use. The tests start and stop their own
# servers with it (test/s3-server.ts); `serve` runs one in the foreground.
#
#   scripts/s3.sh build                 build it once (about 2 minutes; needs Go)
#   scripts/s3.sh path                  print the binary's path
#   scripts/s3.sh serve <dir> [port]    serve <dir> on 127.0.0.1:<port> (default 7070); each folder in it
#                                       is a bucket; keys from VIDBATCH_S3_ACCESS / VIDBATCH_S3_SECRET
set -euo pipefail

VERSION=v1.8.0 # test/s3-server.ts VERSITYGW_VERSION
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vidbatch
BIN=$CACHE/versitygw/$VERSION/versitygw
export PATH="$PATH:/usr/local/go/bin"

build() {
  [ -x "$BIN" ] && return
  command -v go >/dev/null || {
    echo "s3: the Go toolchain is not installed (needed once to build versitygw)" >&2
    exit 1
  }
  local staging=$BIN.partial-$$ t0=$SECONDS
  rm -rf "$staging"
  mkdir -p "$staging"
  echo "s3: building versitygw $VERSION with $(go version | cut -d' ' -f3) (first time only)..." >&2
  GOBIN=$staging GOFLAGS=${GOFLAGS:--mod=mod} go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2 || {
    rm -rf "$staging"
    echo "s3: go install versitygw@$VERSION failed" >&2
    exit 1
  }
  mv "$staging/versitygw" "$BIN"
  rm -rf "$staging"
  echo "s3: built in $((SECONDS - t0)) s: $BIN" >&2
}

case "${1:-}" in
build) build ;;
path) echo "$BIN" ;;
serve)
  [ -n "${2:-}" ] || {
    echo "usage: scripts/s3.sh serve <dir> [port]" >&2
    exit 2
  }
  build
  mkdir -p "$2"
  exec "$BIN" --access "${VIDBATCH_S3_ACCESS:-vidbatch}" --secret "${VIDBATCH_S3_SECRET:-vidbatch-secret}" \
    --port "127.0.0.1:${3:-7070}" posix "$2"
  ;;
*)
  echo "usage: scripts/s3.sh build | path | serve <dir> [port]" >&2
  exit 2
  ;;
esac
