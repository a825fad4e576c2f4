#!/usr/bin/env python3
"""sentence-transformers side of the encoder benchmark: the same JSONL sentences, the same
model folder, the same batch sizes; one JSON line per batch size, as `credence bench-embed`
prints. Runs in the throwaway venv that bench/embed builds.

    bench/.venv-st/bin/python bench/st_bench.py --model models/all-MiniLM-L6-v2 \
        --threads 1 --batch-sizes 32,128 sentences.jsonl
"""
import argparse
import json
import time

import torch
from sentence_transformers import SentenceTransformer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=0, help="0 = torch's default (all cores)")
    ap.add_argument("--batch-sizes", default="32,128")
    ap.add_argument("--vectors-out", help="also write the vectors of the last batch size (JSONL)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in open(args.input, encoding="utf-8") if line.strip()]
    texts = [r["text"] for r in rows]
    model = SentenceTransformer(args.model, device=args.device)
    vectors = None
    for bs in [int(b) for b in args.batch_sizes.split(",")]:
        model.encode(texts[:bs], batch_size=bs, normalize_embeddings=True)
        start = time.perf_counter()
        with torch.inference_mode():
            vectors = model.encode(texts, batch_size=bs, normalize_embeddings=True)
        if args.device != "cpu":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        print(json.dumps({
            "impl": "sentence-transformers",
            "device": args.device,
            "versions": f"sentence-transformers {__import__('sentence_transformers').__version__}, torch {torch.__version__}",
            "sentences": len(texts),
            "batch_size": bs,
            "threads": torch.get_num_threads(),
            "seconds": seconds,
            "sentences_per_s": len(texts) / seconds,
        }), flush=True)
    if args.vectors_out and vectors is not None:
        with open(args.vectors_out, "w", encoding="utf-8") as f:
            for r, v in zip(rows, vectors):
                f.write(json.dumps({"id": r["id"], "embedding": [float(x) for x in v]}) + "\n")


if __name__ == "__main__":
    main()
