#!/usr/bin/env bash
# The paper's sweep rehearsed at full size (or 1/N) on the distributed engine against
# simulated GPU model servers: bench/rehearse_paper.py says what it runs and measures.
#
#   bench/rehearse-paper.sh [--scale N] [--workers W] [--pilot P] [--out DIR] [--keep]
#
# Builds the credence binary and, when missing, the benchmark datasets
# (scripts/build_datasets). Needs the local PostgreSQL and RabbitMQ (scripts/setup
# --services starts them); CREDENCE_REHEARSAL_PG and CREDENCE_REHEARSAL_BROKER point
# elsewhere. The full size takes tens of minutes on 2 cores; CI runs --scale 20.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/credence/target}"
export CREDENCE_MODELS_DIR="${CREDENCE_MODELS_DIR:-$PWD/models}"
if [ -z "${CREDENCE_BIN:-}" ]; then
  echo "building credence" >&2
  cargo build --quiet --bin credence
  CREDENCE_BIN="$CARGO_TARGET_DIR/debug/credence"
fi
for d in socialclaimsplit-100 wikisplit-bench-100 wikisplit-bench-1000 claimdecomp-bench-1000; do
  if [ ! -s "datasets/$d.jsonl" ]; then
    echo "datasets/$d.jsonl is missing: building the datasets (scripts/build_datasets)" >&2
    scripts/build_datasets >/dev/null
    break
  fi
done
exec python3 bench/rehearse_paper.py --credence "$CREDENCE_BIN" "$@"
