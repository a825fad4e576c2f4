"""Write a JSONL of {"id", "source", "text"} drawn from the shared data sets, for the
spaCy parity and speed comparisons (stdlib only; deterministic for a given seed).

usage: python3 make_texts.py SHARED_DATA_DIR OUT.jsonl [--count N | --min-words W] [--seed S]
       python3 make_texts.py --golden GOLDEN.jsonl OUT.jsonl --min-words W
The first form samples N distinct texts (or as many as hold at least W words); the
second repeats the golden texts until they hold at least W words.
"""
import argparse
import csv
import json
import os
import random


def wiki_split(d):
    with open(os.path.join(d, "wiki-split", "test.tsv"), encoding="utf8") as f:
        for line in f:
            yield line.split("\t")[0].strip()


def ag_news(d):
    with open(os.path.join(d, "ag_news_csv", "test.csv"), encoding="utf8", newline="") as f:
        for row in csv.reader(f):
            if len(row) == 3:
                yield (row[1] + ". " + row[2].replace("\\", " ")).strip()


def fever(d):
    with open(os.path.join(d, "fever", "paper_dev.jsonl"), encoding="utf8") as f:
        for line in f:
            yield json.loads(line)["claim"]


def liar(d):
    for name in ("test2.jsonl", "val2.jsonl"):
        with open(os.path.join(d, "liar-plus", "dataset", "jsonl", name), encoding="utf8") as f:
            for line in f:
                rec = json.loads(line)
                yield rec["claim"]
                if rec.get("justification"):
                    yield rec["justification"]


def sample(shared, count, seed):
    rng = random.Random(seed)
    sources = {"wiki-split": wiki_split, "ag_news": ag_news, "fever": fever, "liar-plus": liar}
    out = []
    per = count // len(sources) + 1
    for name, fn in sources.items():
        texts = [t for t in fn(shared) if t.strip()]
        for t in rng.sample(texts, min(per, len(texts))):
            out.append((name, t))
    rng.shuffle(out)
    return out[:count]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--golden", action="store_true", help="SRC is the golden JSONL; repeat it")
    ap.add_argument("--min-words", type=int)
    a = ap.parse_args()
    if a.golden:
        with open(a.src, encoding="utf8") as f:
            texts = [("golden", json.loads(line)["text"]) for line in f]
        rows, words = [], 0
        while words < (a.min_words or 100_000):
            for t in texts:
                rows.append(t)
                words += len(t[1].split())
    elif a.min_words:
        rows, words = [], 0
        for row in sample(a.src, 40_000, a.seed):
            if words >= a.min_words:
                break
            rows.append(row)
            words += len(row[1].split())
        if words < a.min_words:
            raise SystemExit("the data sets hold only %d words of distinct texts" % words)
    else:
        rows = sample(a.src, a.count, a.seed)
    with open(a.out, "w", encoding="utf8") as f:
        for i, (source, text) in enumerate(rows):
            f.write(json.dumps({"id": i, "source": source, "text": text}, ensure_ascii=False) + "\n")
    print("wrote %d texts (%d words) to %s" % (len(rows), sum(len(t.split()) for _, t in rows), a.out))


if __name__ == "__main__":
    main()
