#!/usr/bin/env bash
# The GPU rehearsal: credence on CUDA at the paper's real model shapes (random weights
# written here, no download) beside the Python references on the same weights, then a
# table and the paper sweep's projected time on this GPU.
#
#   bench/gpu/rehearse.sh CREDENCE_BINARY OUT_DIR [--tiny] [--models LIST]
#
# Models (--models, comma-separated, in this order by default):
# - bge-large: the encoder at BGE-large's shape; credence's CUDA sentences/s at batch 32
#   and 128 (padded attention, and per-sequence for comparison) beside
#   sentence-transformers on the same GPU, and the cosine of each CUDA vector to the CPU's.
# - phi3-mini, qwen3-8b: bf16 safetensors; `credence bench-llm` at 1 / 8 / 32 / 64 in
#   flight beside transformers. The first of them also gets the memory steps: the GPU
#   memory a short run holds (sampled with nvidia-smi; the load's peak against the
#   weights' bytes), then an induced out-of-memory: another process holds all but that
#   much and 2.5 GiB, and one long prompt runs beside two short ones. It must fail alone,
#   with an error, while the others finish and the process lives.
# - gemma3-12b-q4k: a Q4_K GGUF at Gemma-3-12b's shape (make_models.py writes it with
#   numpy); credence only (transformers has no Q4_K kernels).
# Each model's decode also runs with its steps captured as CUDA graphs
# (CREDENCE_CUDA_GRAPHS=on), and a short run's token ids with them must equal the same
# steps' run eagerly.
#
# CREDENCE_BINARY is a CUDA build (scripts/build_cuda; a .xz is unpacked). Every step has
# a time limit, and results are written to OUT_DIR as they come (results.jsonl, one JSON
# line per measurement; log.txt; table.md at the end), so a rehearsal cut short still
# leaves what it measured. Sized for under 8 minutes on one H100/H200 (the model files are
# written to WORK, a temporary folder unless set, and removed after each model). --tiny
# runs the same steps at toy shapes on the CPU to check the logic, and exits 1 if any step
# failed; its models are written with the standard library alone, so it runs where
# python3 has no torch (scripts/test runs it), leaving out the references' steps there.
# Needs python3 with torch, transformers and sentence-transformers (the GPU machines'
# image has them). CREDENCE_SIZES and HF_SIZES (N:PROMPTS lists) trim or widen it; SKIP
# (a regular expression over step names, e.g. 'transformers|f16') leaves steps out.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
usage="usage: rehearse.sh CREDENCE_BINARY OUT_DIR [--tiny] [--models LIST]"
BIN="${1:?$usage}"
OUT="${2:?$usage}"
shift 2
TINY=""
MODELS="bge-large,phi3-mini,gemma3-12b-q4k,qwen3-8b"
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) TINY=--tiny; shift ;;
    --models) MODELS="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "rehearse.sh: unknown argument $1 ($usage)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
LOG="$OUT/log.txt"
: >"$RESULTS"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$work"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

if [[ "$BIN" == *.xz ]]; then
  xz -dc "$BIN" >"$work/credence" && chmod +x "$work/credence" && BIN="$work/credence"
fi
DEVICE=cuda
TOKENS=128
SENTENCES=4000
CREDENCE_SIZES="${CREDENCE_SIZES:-1:2,8:16,32:32,64:64}"
HF_SIZES="${HF_SIZES:-1:1,32:32,64:64}"
# Words of the long prompt of the out-of-memory step (within each model's context).
declare -A LONG_WORDS=([phi3-mini]=3800 [qwen3-8b]=12000)
if [ -n "$TINY" ]; then
  DEVICE=cpu TOKENS=8 SENTENCES=64 CREDENCE_SIZES=1:1,4:4 HF_SIZES="1:1,4:4"
  # Without torch (CI) the references are left out; everything of credence's runs.
  if ! python3 -c 'import torch, transformers, sentence_transformers' 2>/dev/null; then
    log "no torch, transformers and sentence-transformers here: their steps are left out"
    SKIP="${SKIP:+$SKIP|}^transformers|^sentence-transformers"
  fi
fi
if [ "$DEVICE" = cuda ]; then
  # The driver's libcuda and a CUDA 13 runtime's cuBLAS/cuRAND (torch's wheels).
  site="$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
  culib="$(dirname "$(find "$site/nvidia" -name 'libcublas.so.*' | head -n 1)")"
  export LD_LIBRARY_PATH="/usr/local/nvidia/lib64:$culib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$LOG"
fi
"$BIN" --version >>"$LOG" 2>&1 || { log "the binary does not run"; ldd "$BIN" | tee -a "$LOG"; exit 1; }

# Prompts of ~90 random words ("w3".."w31999", in every model's vocabulary), so no two
# share a prefix beyond the chat template (credence reuses shared prefixes).
python3 - "$work/prompts.jsonl" <<'PY'
import json, random, sys
r = random.Random(7)
with open(sys.argv[1], "w") as f:
    for i in range(128):
        words = " ".join(f"w{r.randrange(3, 32000)}" for _ in range(r.randrange(80, 100)))
        f.write(json.dumps({"id": f"p{i}", "text": words}) + "\n")
PY

# Adds a JSON line (a Python dict expression over `r`, the step's name) to the results.
record() {
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["step"]=sys.argv[2]; print(json.dumps(r))' \
    "$1" "$2" >>"$RESULTS"
}

# Steps that failed (--tiny fails the run on any).
failed=()

# The GPU's used memory, sampled every 100 ms into $1 while a step runs (CUDA only).
sampler=""
start_sampler() {
  [ "$DEVICE" = cuda ] || return 0
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$1" 2>/dev/null &
  sampler=$!
}
stop_sampler() {
  [ -n "$sampler" ] || return 0
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; sampler=""
}

# step NAME SECONDS COMMAND...: runs with a limit; JSON lines of its output go to the
# results, each with the step's name and, on CUDA, the step's peak GPU memory above what
# was in use before it (MiB).
step() {
  local name="$1" limit="$2"
  shift 2
  if [ -n "${SKIP:-}" ] && [[ "$name" =~ $SKIP ]]; then
    log "$name: skipped (SKIP)"
    return 0
  fi
  log "$name (limit ${limit}s)"
  local base=0 samples="$work/memory.csv"
  [ "$DEVICE" = cuda ] && base="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -n 1)"
  start_sampler "$samples"
  timeout "$limit" "$@" 2>>"$LOG" >"$work/step.out"
  local rc=$?
  stop_sampler
  local peak=0
  [ -s "$samples" ] && peak=$(( $(sort -n "$samples" | tail -n 1) - base ))
  while IFS= read -r line; do
    echo "$line" >>"$LOG"
    if [[ "$line" == "{"* ]]; then
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["step"]=sys.argv[2]
if int(sys.argv[3]) > 0: r["peak_gpu_mib"]=int(sys.argv[3])
print(json.dumps(r))' "$line" "$name" "$peak" >>"$RESULTS"
    fi
  done <"$work/step.out"
  [ "$rc" = 0 ] || { log "$name: exit status $rc"; failed+=("$name"); }
  echo "$peak" >"$work/last_peak"
  return "$rc"
}

encoder() {
  local dir="$work/models/bge-large" sentences="$work/sentences.jsonl"
  step "make bge-large" 120 python3 "$here/make_encoder.py" "$dir" "$sentences" --n "$SENTENCES" $TINY || return
  local b=(--encoder "$dir" --device "$DEVICE" "$sentences")
  step "credence bge-large" 120 "$BIN" bench-embed "${b[@]}" --backend candle --batch-sizes 32,128
  # The dense layers as candle's product and broadcast add instead of cuBLASLt's fused
  # bias (embed/lt.rs), for comparison.
  [ "$DEVICE" = cuda ] && step "credence-candle-dense bge-large" 90 \
    env CREDENCE_ENCODER_DENSE=candle "$BIN" bench-embed "${b[@]}" --backend candle --batch-sizes 32,128
  step "credence bge-large f16" 90 "$BIN" bench-embed "${b[@]}" --backend candle --batch-sizes 128 \
    $([ "$DEVICE" = cuda ] && echo --precision f16)
  step "credence-per-sequence bge-large" 90 "$BIN" bench-embed "${b[@]}" --backend candle \
    --attention per-sequence --batch-sizes 128 --limit $((SENTENCES / 4))
  step "sentence-transformers bge-large" 120 python3 "$here/../st_bench.py" --model "$dir" \
    --device "$DEVICE" --batch-sizes 32,128 "$sentences"
  # The same vectors: the first 256 sentences on the device and on the CPU (native).
  head -n 256 "$sentences" >"$work/cosine.jsonl"
  step "vectors bge-large $DEVICE" 60 "$BIN" embed --encoder "$dir" --device "$DEVICE" \
    --batch-size 128 --out "$work/device.vectors" "$work/cosine.jsonl"
  step "vectors bge-large cpu" 120 "$BIN" embed --encoder "$dir" --device cpu \
    --batch-size 128 --out "$work/cpu.vectors" "$work/cosine.jsonl"
  [ -s "$work/device.vectors" ] && [ -s "$work/cpu.vectors" ] &&
    record "$(python3 - "$work/device.vectors" "$work/cpu.vectors" <<'PY'
import json, sys
load = lambda p: [json.loads(l)["embedding"] for l in open(p)]
pairs = list(zip(load(sys.argv[1]), load(sys.argv[2])))
cos = [sum(x * y for x, y in zip(a, b)) for a, b in pairs]
print(json.dumps({"impl": "credence", "model": "bge-large", "vectors": len(pairs),
                  "min_cosine_device_cpu": min(cos) if cos else None}))
PY
)" "cosine bge-large"
  rm -rf "$dir"
}

# The memory steps of one safetensors model folder.
memory_and_oom() {
  local m="$1" dir="$2"
  local bytes
  bytes=$(du -sb --apparent-size "$dir" | cut -f1)
  step "memory $m" 120 "$BIN" bench-llm --model "$dir" "$work/prompts.jsonl" --device "$DEVICE" \
    --dtype bf16 --max-tokens 16 --prompts 2 --in-flight 2 || return
  local peak
  peak=$(cat "$work/last_peak")
  record "{\"impl\": \"credence\", \"model\": \"$m\", \"weights_mib\": $((bytes / 1048576)), \"held_mib\": $peak}" "memory $m"
  [ "$DEVICE" = cuda ] || return 0
  python3 - "$work/prompts.jsonl" "$work/oom.jsonl" "${LONG_WORDS[$m]:-3800}" <<'PY'
import json, sys
short = [json.loads(l) for l in open(sys.argv[1])][:2]
with open(sys.argv[2], "w") as f:
    words = int(sys.argv[3])
    f.write(json.dumps({"id": "long", "text": " ".join(f"w{3 + i % 31000}" for i in range(words))}) + "\n")
    for p in short:
        f.write(json.dumps(p) + "\n")
PY
  # Another process holds all but what the short run held and 2.5 GiB: the 2 GiB a
  # decode step keeps free beside the keys and values (batch_kv.rs, HEADROOM) and some.
  # The long prompt's keys and values (1.6 GiB for Phi-3's 4,096 positions) do not fit
  # beside them; the short prompts' do.
  python3 -c 'import torch, time, sys
leave = (int(sys.argv[1]) + 2560) * 2**20
free, _ = torch.cuda.mem_get_info()
hold = torch.empty(max(free - leave, 0), dtype=torch.uint8, device="cuda")
print(f"holding {hold.numel() / 2**30:.1f} GiB, leaving {leave / 2**30:.1f}", flush=True)
time.sleep(600)' "$peak" >>"$LOG" 2>&1 &
  local holder=$!
  sleep 12
  step "out-of-memory $m" 120 "$BIN" bench-llm --model "$dir" "$work/oom.jsonl" --device cuda \
    --dtype bf16 --max-tokens 16 --prompts 3 --in-flight 3 --keep-going
  record "{\"impl\": \"credence\", \"model\": \"$m\", \"process_exit\": $?}" "out-of-memory $m exit"
  kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
}

# Decode steps captured as CUDA graphs (CREDENCE_CUDA_GRAPHS=on, step_graph.rs) at the
# sizes it captures (a GGUF model's steps of at most eight rows), and the token ids of a
# short run with them against the same fixed-shape steps run eagerly (=eager), which must
# be equal. On the CPU (--tiny) both run eagerly. Arguments: the model's name, then
# bench-llm's model arguments.
graphs() {
  local m="$1" sizes="$CREDENCE_SIZES"
  shift
  [[ "$m" == *-q4k ]] && sizes="${GRAPH_GGUF_SIZES:-1:2,8:16}"
  [ -n "$TINY" ] && sizes=1:1,4:4
  step "credence-graphs $m" 240 env CREDENCE_CUDA_GRAPHS=on "$BIN" bench-llm "$@" \
    "$work/prompts.jsonl" --device "$DEVICE" --max-tokens "$TOKENS" --prompts 128 --in-flight "$sizes"
  local mode
  for mode in on eager; do
    step "ids-graphs-$mode $m" 120 env CREDENCE_CUDA_GRAPHS=$mode "$BIN" bench-llm "$@" \
      "$work/prompts.jsonl" --device "$DEVICE" --max-tokens 32 --prompts 8 --in-flight 1,8 \
      --outputs "$work/ids-$mode.jsonl" || return
  done
  local same=false
  cmp -s "$work/ids-on.jsonl" "$work/ids-eager.jsonl" && same=true
  record "{\"impl\": \"credence\", \"model\": \"$m\", \"graph_ids_equal_eager\": $same, \"generations\": $(wc -l <"$work/ids-on.jsonl")}" "ids-graphs $m"
  [ "$same" = true ] || { log "ids-graphs $m: captured steps' ids differ from eager ones"; failed+=("ids-graphs $m"); }
}

llm() {
  local m="$1" memory="$2"
  step "make $m" 240 python3 "$here/make_models.py" "$work/models" --models "$m" $TINY || return
  if [[ "$m" == *-q4k ]]; then
    # Named after the model: bench-llm reports the file's name.
    local file="$work/models/$m/$m.gguf" made
    made="$(find "$work/models/$m" -name '*.gguf' | head -n 1)"
    [ -n "$made" ] && [ "$made" != "$file" ] && mv "$made" "$file"
    step "credence $m" 240 "$BIN" bench-llm --model "$file" "$work/prompts.jsonl" \
      --device "$DEVICE" --max-tokens "$TOKENS" --prompts 128 --in-flight "$CREDENCE_SIZES"
    # The batched keys and values in bf16 (CREDENCE_LLM_KV_DTYPE; the activations stay
    # f32): half the bytes a sequence in flight holds, so twice as many fit at the
    # paper's generation limit. Its speed beside the f32 rows decides the default.
    step "credence-kv-bf16 $m" 240 env CREDENCE_LLM_KV_DTYPE=bf16 "$BIN" bench-llm \
      --model "$file" "$work/prompts.jsonl" --device "$DEVICE" --max-tokens "$TOKENS" \
      --prompts 128 --in-flight "$CREDENCE_SIZES"
    graphs "$m" --model "$file"
  else
    local dir="$work/models/$m"
    [ "$memory" = yes ] && memory_and_oom "$m" "$dir"
    step "credence $m" 240 "$BIN" bench-llm --model "$dir" "$work/prompts.jsonl" \
      --device "$DEVICE" --dtype bf16 --max-tokens "$TOKENS" --prompts 128 --in-flight "$CREDENCE_SIZES"
    graphs "$m" --model "$dir" --dtype bf16
    step "transformers $m" 240 python3 "$here/hf_generate.py" --model "$dir" \
      --prompt-file "$work/prompts.jsonl" --in-flight "$HF_SIZES" --max-tokens "$TOKENS"
  fi
  rm -rf "$work/models/$m"
}

IFS=, read -r -a models <<<"$MODELS"
memory=yes
for m in "${models[@]}"; do
  case "$m" in
    bge-large) encoder ;;
    *-q4k) llm "$m" no ;;
    *) llm "$m" "$memory"; memory=no ;;
  esac
done

python3 "$here/rehearsal_table.py" "$RESULTS" | tee "$OUT/table.md"
if [ -n "$TINY" ] && [ "${#failed[@]}" -gt 0 ]; then
  log "failed: ${failed[*]}"
  exit 1
fi
