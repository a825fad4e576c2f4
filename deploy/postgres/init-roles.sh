#!/usr/bin/env bash
# Run by the postgres image (deploy/compose.yaml mounts it into /docker-entrypoint-initdb.d)
# once, when it initialises an empty data folder: creates the app role `credence` (no
# superuser; owner of the database) and the read-only role `grafana` with
# deploy/postgres/roles.sql, mounted at /credence/roles.sql. The image's superuser
# (POSTGRES_USER, `postgres`) stays its admin only. The passwords come from the
# container's environment (CREDENCE_APP_DB_PASSWORD, CREDENCE_GRAFANA_DB_PASSWORD).
set -euo pipefail
psql -X -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --no-password \
  --dbname "${POSTGRES_DB:-postgres}" -v database="${POSTGRES_DB:-credence}" \
  -f /credence/roles.sql
