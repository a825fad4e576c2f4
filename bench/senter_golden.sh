#!/usr/bin/env bash
# Rebuilds worker/tests/fixtures/senter_golden.jsonl with real spaCy 3.8's sentence
# recognizer (a throwaway venv, bench/.venv-spacy): the spans worker/tests/nlp_senter.rs
# holds credence's senter port to.
#   bench/senter_golden.sh
set -euo pipefail
CREDENCE_BIN=unused
source "$(dirname "$0")/common.sh"
"$VENV/bin/python" "$ROOT/bench/senter_golden.py" "$MODEL" "$SHARED_DATA" \
    "$ROOT/worker/tests/fixtures/senter_golden.jsonl"
