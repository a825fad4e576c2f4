#!/usr/bin/env bash
# Atomicity parity with real spaCy: the three rules of PAPER.md "Decided here" run in
# Python on spaCy 3.8 + en_core_web_sm 3.8.0 and by `credence verify --claims` on the
# same >= 1,500 claims from the shared data (FEVER, SciFact, CovidFact, LIAR-PLUS claims
# and WikiSplit sentences), compared per claim (atomic, n_viol, every boundary).
# Exits non-zero on any difference.
# usage: bench/atomicity_parity.sh [COUNT] [--advcl-requires-subject]   (not part of CI)
source "$(dirname "$0")/common.sh"
COUNT="${1:-2000}"
EXTRA="${2:-}"
IN="$WORK/atomicity-claims.jsonl"
python3 "$ROOT/bench/atomicity_claims.py" sample "$SHARED_DATA" "$IN" --count "$COUNT"
"$VENV/bin/python" "$ROOT/bench/atomicity_claims.py" spacy "$MODEL" "$IN" "$WORK/atomicity-spacy.jsonl" $EXTRA
"$CREDENCE_BIN" verify --model "$MODEL" --claims "$IN" --out "$WORK/atomicity-credence.jsonl" $EXTRA
python3 "$ROOT/bench/atomicity_claims.py" compare "$WORK/atomicity-spacy.jsonl" "$WORK/atomicity-credence.jsonl" --show "${SHOW:-30}"
