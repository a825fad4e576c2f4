#!/usr/bin/env python3
"""llama.cpp side of the local-LLM benchmark (run with bench/.venv-llamacpp/bin/python).

For each prompt, renders SmolLM2's ChatML chat (its template's default system turn, one user turn) as ids,
times the prefill (one eval of the prompt ids) and, separately, greedy decoding of exactly
--max-tokens tokens (argmax of llama.cpp's logits, then one eval per token, like
llama-bench's tg; EOS/<|im_end|> ignored), resetting the context between prompts. One
untimed warm-up prompt runs first. Prints one JSON line:
{"impl":"llama.cpp","threads":N,"prefill_tok_s":..,"decode_tok_s":..,"prompts":K,
 "prompt_tokens":..,"generated_tokens":..,"simd":"..."}
Rates are totals over all prompts (tokens / seconds).

Usage: bench/.venv-llamacpp/bin/python bench/llm_llamacpp.py --model PATH --threads N \
         --prompt-file bench/llm_prompts.jsonl --n-prompts 8 --max-tokens 128
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama


# SmolLM2's own chat template adds this system turn when the chat has none; credence
# renders that template, so both sides run the same token ids.
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def chatml(user: str) -> str:
    return (f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n"
            f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def simd_features() -> str:
    info = llama_cpp.llama_print_system_info()
    info = info.decode() if isinstance(info, bytes) else info
    feats = []
    for part in info.replace("|", "\n").splitlines():
        if "=" in part:
            k, v = (x.strip() for x in part.rsplit("=", 1))
            k = k.split(":")[-1].strip()
            if v == "1" and k not in feats:
                feats.append(k)
    return ",".join(feats)


def last_logits(llm: Llama) -> np.ndarray:
    # With logits_all=False, Llama.eval (0.3.x) requests logits for the batch's last token
    # only and does not copy them into llm.scores, so read llama.cpp's output buffer directly.
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


def run_prompt(llm: Llama, ids: list[int], max_tokens: int) -> tuple[float, float]:
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    for _ in range(max_tokens):  # each generated token is sampled and evaluated
        llm.eval([int(np.argmax(last_logits(llm)))])
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--prompt-file", required=True, help="JSONL of {\"text\": ...}")
    ap.add_argument("--n-prompts", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()

    texts = []
    with open(args.prompt_file, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                texts.append(json.loads(line)["text"])
    texts = texts[: args.n_prompts]
    if len(texts) < args.n_prompts:
        sys.exit(f"error: {args.prompt_file} has only {len(texts)} prompts")

    llm = Llama(model_path=args.model, n_ctx=1024, n_batch=512, n_threads=args.threads,
                n_threads_batch=args.threads, logits_all=False, verbose=False)
    prompts = [llm.tokenize(chatml(t).encode(), add_bos=False, special=True) for t in texts]
    if max(len(p) for p in prompts) + args.max_tokens > llm.n_ctx():
        sys.exit("error: prompt + max_tokens exceeds n_ctx")

    run_prompt(llm, prompts[0], min(8, args.max_tokens))  # warm-up, untimed

    prefill_s = decode_s = 0.0
    for ids in prompts:
        p, d = run_prompt(llm, ids, args.max_tokens)
        prefill_s += p
        decode_s += d
    n_prompt = sum(len(p) for p in prompts)
    n_gen = args.max_tokens * len(prompts)
    print(json.dumps({
        "impl": "llama.cpp",
        "threads": args.threads,
        "prefill_tok_s": round(n_prompt / prefill_s, 1),
        "decode_tok_s": round(n_gen / decode_s, 1),
        "prompts": len(prompts),
        "prompt_tokens": n_prompt,
        "generated_tokens": n_gen,
        "simd": simd_features(),
        "llama_cpp_python": llama_cpp.__version__,
    }))


if __name__ == "__main__":
    main()
