#!/bin/sh
# Creates (or upgrades) Temporal's two PostgreSQL databases: the default store and the visibility store.
# Run by the `temporal-schema` service (temporalio/admin-tools) before the server starts, and by
# `scripts/cluster.sh up` (natively, with the temporal-sql-tool it built). Every step is
# re-runnable: `create` ignores an existing database, `setup-schema -v 0.0` only adds the version tables when
# they are missing, and `update-schema` applies just the versions the database does not have yet, so the same
# script both initialises a fresh volume and upgrades an old one after an image bump.
set -eu

: "${POSTGRES_SEEDS:?POSTGRES_SEEDS (PostgreSQL host) is required}"
: "${SQL_USER:?SQL_USER is required}"
: "${SQL_PASSWORD:?SQL_PASSWORD is required}"
# Where admin-tools keeps the schema files; scripts/cluster.sh points it at the copy it took from the server's
# module (the same files, same version).
SCHEMA_ROOT=${SCHEMA_ROOT:-/etc/temporal/schema/postgresql/v12}

sql() {
  temporal-sql-tool --plugin postgres12 --ep "$POSTGRES_SEEDS" -p "${DB_PORT:-5432}" "$@"
}

for store in temporal:temporal temporal_visibility:visibility; do
  db=${store%%:*}
  dir=$SCHEMA_ROOT/${store#*:}/versioned
  echo "schema: $db"
  sql --db "$db" create
  sql --db "$db" setup-schema -v 0.0
  sql --db "$db" update-schema -d "$dir"
done
echo 'schema: up to date'
