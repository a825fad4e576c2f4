#!/usr/bin/env python3
"""Writes N distinct short sentences as {"id", "text"} JSONL to standard output, for the
encoder benchmark: FEVER dev claims, then SciFact and CovidFact claims, in file order.

    python3 bench/sentences.py --n 10000 --data-dir ../shared/data > sentences.jsonl
"""
import argparse
import json
import sys
from pathlib import Path


def claims(data: Path):
    for line in open(data / "fever" / "paper_dev.jsonl", encoding="utf-8"):
        yield json.loads(line)["claim"]
    for name in ("claims_train.jsonl", "claims_dev.jsonl", "claims_test.jsonl"):
        for line in open(data / "scifact" / name, encoding="utf-8"):
            yield json.loads(line)["claim"]
    for line in open(data / "covidfact" / "COVIDFACT_dataset.jsonl", encoding="utf-8"):
        yield json.loads(line)["claim"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
    args = ap.parse_args()
    seen = set()
    for text in claims(args.data_dir):
        text = text.strip()
        if text and text not in seen:
            seen.add(text)
            print(json.dumps({"id": len(seen) - 1, "text": text}))
            if len(seen) == args.n:
                return 0
    print(f"only {len(seen)} distinct sentences in {args.data_dir}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
