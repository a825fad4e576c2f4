#!/usr/bin/env bash
# Words/s of real spaCy (nlp.pipe) and of `credence nlp parse`, single thread and all
# cores, in one run, on two inputs of >= MIN_WORDS words: the golden texts repeated (268
# texts, each ~29 times) and texts sampled from the shared data sets without
# replacement (3,669 texts at 100,000 words, 3,667 of them distinct). credence keeps the embedding stage's output per distinct token (feature ids),
# so repeated texts flatter it; the distinct input is the fair one. Prints both figures,
# their ratio and credence's peak memory (/usr/bin/time -v) for each input.
# usage: bench/spacy_speed.sh [MIN_WORDS]     (not part of CI)
source "$(dirname "$0")/common.sh"
MIN_WORDS="${1:-100000}"
CORES="$(nproc)"
spacy_wps() { # n_process
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
        "$VENV/bin/python" "$ROOT/bench/spacy_run.py" speed "$MODEL" "$IN" "$1" |
        python3 -c "import json,sys; print('%.0f' % json.load(sys.stdin)['words_per_s'])"
}
credence_run() { # threads -> "words/s peak_kb"
    local t0 t1 rss
    t0=$(date +%s.%N)
    /usr/bin/time -v "$CREDENCE_BIN" nlp parse --threads "$1" --model "$MODEL" "$IN" --out "$WORK/speed-out.jsonl" 2> "$WORK/time-$1.txt"
    t1=$(date +%s.%N)
    rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time-$1.txt")
    python3 -c "import sys; w,a,b,r=map(float,sys.argv[1:]); print('%.0f %d' % (w/(b-a), r))" "$WORDS" "$t0" "$t1" "$rss"
}
compare() { # label
    WORDS="$(python3 -c "import json,sys; print(sum(len(json.loads(l)['text'].split()) for l in open(sys.argv[1])))" "$IN")"
    S1=$(spacy_wps 1); SN=$(spacy_wps "$CORES")
    read -r C1 M1 <<<"$(credence_run 1)"; read -r CN MN <<<"$(credence_run "$CORES")"
    echo "$1: $(wc -l < "$IN") texts, $WORDS words; $CORES cores"
    printf '%-12s %12s %12s %8s %14s\n' threads spaCy_w/s credence_w/s ratio credence_peak
    printf '%-12s %12s %12s %8s %11s MB\n' 1 "$S1" "$C1" "$(python3 -c "print('%.2fx' % ($C1/$S1))")" "$((M1/1024))"
    printf '%-12s %12s %12s %8s %11s MB\n' "$CORES" "$SN" "$CN" "$(python3 -c "print('%.2fx' % ($CN/$SN))")" "$((MN/1024))"
}
echo "credence times the whole command (load + read + parse + write); spaCy times nlp.pipe only"
IN="$WORK/speed-input.jsonl"
python3 "$ROOT/bench/make_texts.py" --golden "$SHARED_DATA/spacy-golden/en_core_web_sm-golden.jsonl" "$IN" --min-words "$MIN_WORDS"
compare "golden texts repeated"
IN="$WORK/speed-distinct.jsonl"
python3 "$ROOT/bench/make_texts.py" "$SHARED_DATA" "$IN" --min-words "$MIN_WORDS" --seed 54
compare "distinct texts"
