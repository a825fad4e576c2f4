#!/usr/bin/env bash
# The GPU rehearsal: credence's local LLM decoding on CUDA at the paper's real model shapes
# (random weights written here, no download) beside Hugging Face transformers on the same
# weights and prompts, then a table and the paper sweep's projected time on this GPU.
#
#   bench/gpu/rehearse.sh CREDENCE_BINARY OUT_DIR [--tiny] [--models qwen3-8b,phi3-mini]
#
# CREDENCE_BINARY is a CUDA build (scripts/build_cuda; a .xz is unpacked). Every step has a
# time limit, and results are written to OUT_DIR as they come (results.jsonl, one JSON
# line per measurement; log.txt; table.md at the end), so a rehearsal cut short still
# leaves what it measured. Sized for under 8 minutes on one H100/H200. --tiny runs the
# same steps at toy shapes on the CPU to check the logic (not yet part of CI, which has no
# torch or transformers).
# Needs python3 with torch and transformers (the GPU machines' image has them).
# CREDENCE_SIZES and HF_SIZES (N:PROMPTS lists) and BASELINE (the per-sequence attention's
# size, 0 to skip it) trim or widen it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BIN="${1:?usage: rehearse.sh CREDENCE_BINARY OUT_DIR [--tiny] [--models LIST]}"
OUT="${2:?usage: rehearse.sh CREDENCE_BINARY OUT_DIR [--tiny] [--models LIST]}"
shift 2
TINY=""
MODELS="qwen3-8b,phi3-mini"
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) TINY=--tiny; shift ;;
    --models) MODELS="$2"; shift 2 ;;
    *) echo "rehearse.sh: unknown argument $1" >&2; exit 2 ;;
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
# in flight : prompts run at that size
CREDENCE_SIZES="${CREDENCE_SIZES:-1:2,8:16,32:32,64:64,128:128}"
HF_SIZES="${HF_SIZES:-1:1,8:8,32:32,64:64}"
# The per-sequence attention's size (0: not measured).
BASELINE="${BASELINE:-32}"
if [ -n "$TINY" ]; then
  DEVICE=cpu TOKENS=8 CREDENCE_SIZES=1:1,4:4 HF_SIZES="1:1,4:4" BASELINE=4
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

# step NAME SECONDS COMMAND...: runs with a limit; JSON lines of its output go to results.
step() {
  local name="$1" limit="$2"
  shift 2
  log "$name (limit ${limit}s)"
  timeout "$limit" "$@" 2>>"$LOG" | while IFS= read -r line; do
    echo "$line" >>"$LOG"
    if [[ "$line" == "{"* ]]; then
      python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r["step"]=sys.argv[2]; print(json.dumps(r))' \
        "$line" "$name" >>"$RESULTS"
    fi
  done
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || log "$name: exit status $rc"
}

IFS=, read -r -a models <<<"$MODELS"
for m in "${models[@]}"; do
  step "make $m" 240 python3 "$here/make_models.py" "$work/models" --models "$m" $TINY
  dir="$work/models/$m"
  [ -d "$dir" ] || continue
  step "credence $m" 240 "$BIN" bench-llm --model "$dir" "$work/prompts.jsonl" \
    --device "$DEVICE" --dtype bf16 --max-tokens "$TOKENS" --prompts 128 --in-flight "$CREDENCE_SIZES"
  # The per-sequence attention the batched one replaced, at the same size, same run.
  [ "$BASELINE" = 0 ] || step "credence-per-sequence $m $BASELINE" 180 env CREDENCE_LLM_KV=per-sequence "$BIN" bench-llm \
    --model "$dir" "$work/prompts.jsonl" --device "$DEVICE" --dtype bf16 \
    --max-tokens "$TOKENS" --prompts "$BASELINE" --in-flight "$BASELINE"
  if [ "$m" = "${models[0]}" ] && [ "$DEVICE" = cuda ]; then
    # An induced out-of-memory: another process holds all but 40 GiB of the GPU, and one
    # prompt of ~12,000 tokens (whose prefill needs more than is left) runs beside two
    # short ones. It must fail alone, with an error; the others finish; the process lives.
    python3 - "$work/prompts.jsonl" "$work/oom.jsonl" <<'PY'
import json, sys
short = [json.loads(l) for l in open(sys.argv[1])][:2]
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"id": "long", "text": " ".join(f"w{3 + i % 31000}" for i in range(12000))}) + "\n")
    for p in short:
        f.write(json.dumps(p) + "\n")
PY
    python3 -c 'import torch, time, sys
free, _ = torch.cuda.mem_get_info()
hold = torch.empty(max(free - 40 * 2**30, 0), dtype=torch.uint8, device="cuda")
print(f"holding {hold.numel() / 2**30:.1f} GiB", flush=True)
time.sleep(600)' >>"$LOG" 2>&1 &
    holder=$!
    sleep 15
    step "out-of-memory $m" 120 "$BIN" bench-llm --model "$dir" "$work/oom.jsonl" --device cuda \
      --dtype bf16 --max-tokens 16 --prompts 3 --in-flight 3 --keep-going
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
  fi
  step "transformers $m" 300 python3 "$here/hf_generate.py" --model "$dir" \
    --prompt-file "$work/prompts.jsonl" --in-flight "$HF_SIZES" --max-tokens "$TOKENS"
  rm -rf "$dir"
done

python3 "$here/rehearsal_table.py" "$RESULTS" | tee "$OUT/table.md"
