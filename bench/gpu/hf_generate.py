"""Hugging Face transformers' generation speed on a model folder, the reference the
rehearsal measures credence against on the same weights and prompts: greedy, exactly
--max-tokens new tokens per prompt (end of turn ignored), prompts left-padded into
batches of each --in-flight size. Prints one JSON line per size, in bench-llm's fields.

    python3 bench/gpu/hf_generate.py --model DIR --prompt-file P.jsonl \
        --in-flight 1:2,8:16,32:32 --max-tokens 128

Each --in-flight item is SIZE:PROMPTS (the first PROMPTS prompts, in batches of SIZE).
The prompts are rendered with the folder's chat template and tokenized by its tokenizer,
as credence does.
"""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--in-flight", default="1:2,8:16,32:32")
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    tok = PreTrainedTokenizerFast(tokenizer_file=f"{args.model}/tokenizer.json")
    with open(f"{args.model}/tokenizer_config.json") as f:
        tok.chat_template = json.load(f)["chat_template"]
    texts = [json.loads(l)["text"] for l in open(args.prompt_file) if l.strip()]
    prompts = [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=True,
                                       add_generation_prompt=True) for t in texts]
    prompts = [p if isinstance(p, list) else list(p["input_ids"]) for p in prompts]
    started = time.time()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16,
                                                 device_map=device, attn_implementation="sdpa")
    model.eval()
    load_s = time.time() - started
    pad = 0
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def run(batch):
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch],
                            device=device)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                 max_new_tokens=args.max_tokens,
                                 min_new_tokens=args.max_tokens, pad_token_id=pad)
        return (out.shape[1] - width) * len(batch)

    for item in args.in_flight.split(","):
        size, count = (int(x) for x in item.split(":"))
        chosen = (prompts * (count // max(len(prompts), 1) + 1))[:count]
        run(chosen[:size])  # warm-up at this batch size
        sync()
        t0 = time.time()
        generated = sum(run(chosen[i:i + size]) for i in range(0, count, size))
        sync()
        wall = time.time() - t0
        print(json.dumps({"impl": "transformers", "model": args.model.rstrip("/").split("/")[-1],
                          "in_flight": size, "prompts": count, "generated_tokens": generated,
                          "aggregate_tok_s": generated / wall, "wall_s": wall,
                          "load_s": load_s,
                          "peak_gpu_gb": (torch.cuda.max_memory_allocated() / 1e9
                                          if device == "cuda" else None)}), flush=True)


if __name__ == "__main__":
    main()
