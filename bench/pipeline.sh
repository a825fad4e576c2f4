#!/usr/bin/env bash
# Verification plus every per-example metric over >= 5,000 real examples: WikiSplitBench-1000
# and ClaimDecompBench-1000 built with seeds 42 and 1..7 (distinct texts only, about 5,800),
# decomposed by the conjunction oracle, scored with a cold and then a warm embedding cache
# (`credence bench-pipeline`). Prints the JSON report; not part of CI.
# usage: bench/pipeline.sh [LIMIT]      RAYON_NUM_THREADS=1 for one core;
#        ENCODER_PRECISION=bf16 for the encoder's products in bfloat16 (AVX-512 BF16)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/credence/target}"
corpora="${CREDENCE_CORPORA:-$ROOT/../shared/data}"
cargo build --quiet --bin credence
credence="$CARGO_TARGET_DIR/debug/credence"
work="${WORK:-$(mktemp -d)}"
files=()
for seed in 42 1 2 3 4 5 6 7; do
    "$credence" dataset build wikisplit-bench-1000 --source "$corpora/wiki-split" \
        --out "$work/wiki-$seed.jsonl" --seed "$seed" >/dev/null
    "$credence" dataset build claimdecomp-bench-1000 --source "$corpora/ag_news_csv" \
        --out "$work/claimdecomp-$seed.jsonl" --seed "$seed" >/dev/null
    files+=("$work/wiki-$seed.jsonl" "$work/claimdecomp-$seed.jsonl")
done
"$credence" bench-pipeline ${1:+--limit "$1"} ${ENCODER_PRECISION:+--encoder-precision "$ENCODER_PRECISION"} "${files[@]}"
