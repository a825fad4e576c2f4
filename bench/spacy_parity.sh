#!/usr/bin/env bash
# Larger parity check than the golden test: >= 2,000 texts sampled from the shared data
# sets (wiki-split, AG News, FEVER, LIAR-PLUS), parsed by real spaCy and by
# `credence nlp parse`, compared on every token field and every entity.
# usage: bench/spacy_parity.sh [COUNT]     (not part of CI)
source "$(dirname "$0")/common.sh"
COUNT="${1:-2500}"
python3 "$ROOT/bench/make_texts.py" "$SHARED_DATA" "$WORK/parity-input.jsonl" --count "$COUNT"
"$VENV/bin/python" "$ROOT/bench/spacy_run.py" dump "$MODEL" "$WORK/parity-input.jsonl" "$WORK/parity-spacy.jsonl"
"$CREDENCE_BIN" nlp parse --model "$MODEL" "$WORK/parity-input.jsonl" --out "$WORK/parity-credence.jsonl"
python3 "$ROOT/bench/compare_records.py" "$WORK/parity-spacy.jsonl" "$WORK/parity-credence.jsonl" --show "${SHOW:-60}"
