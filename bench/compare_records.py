"""Compare two golden-format JSONL files (spaCy's and credence's) record by record:
tokenization, tag, pos, morph, head, dep, sentence starts, entity IOB/type, entities.
Prints per-field agreement and every mismatch (up to --show). Exit status 1 if any
field is below --min (percent, default 99.9).

usage: python3 compare_records.py SPACY.jsonl CREDENCE.jsonl [--show N] [--min P]
"""
import argparse
import json
from collections import Counter

FIELDS = ("tag", "pos", "morph", "head", "dep", "sent_start", "ent_iob", "ent_type")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spacy")
    ap.add_argument("ours")
    ap.add_argument("--show", type=int, default=50)
    ap.add_argument("--min", type=float, default=99.9)
    a = ap.parse_args()
    gold = [json.loads(line) for line in open(a.spacy, encoding="utf8")]
    ours = [json.loads(line) for line in open(a.ours, encoding="utf8")]
    assert len(gold) == len(ours), "record counts differ: %d vs %d" % (len(gold), len(ours))
    c = Counter()
    diffs = []
    for g, o in zip(gold, ours):
        c["docs"] += 1
        gt = [(t["text"], t["idx"], t["ws"]) for t in g["tokens"]]
        ot = [(t["text"], t["idx"], t["ws"]) for t in o["tokens"]]
        c["tokens"] += len(gt)
        if gt != ot:
            c["tok_docs_bad"] += 1
            c["tok_bad"] += len(gt)
            diffs.append((g["id"], "tokenization", g["text"][:80], [t[0] for t in gt][:20], [t[0] for t in ot][:20]))
            continue
        for i, (x, y) in enumerate(zip(g["tokens"], o["tokens"])):
            bad = [f for f in FIELDS if x[f] != y[f]]
            c["tok_any_bad"] += bool(bad)
            for f in bad:
                c["bad_" + f] += 1
                diffs.append((g["id"], f, i, x["text"], x[f], y[f]))
        ge = {(e["start_char"], e["end_char"], e["label"]) for e in g["ents"]}
        oe = {(e["start_char"], e["end_char"], e["label"]) for e in o["ents"]}
        c["ents_gold"] += len(ge)
        c["ents_ours"] += len(oe)
        c["ents_match"] += len(ge & oe)
        if ge != oe:
            diffs.append((g["id"], "ents", sorted(ge - oe), sorted(oe - ge)))
    n = c["tokens"]
    pct = lambda bad: 100.0 * (n - bad) / n if n else 100.0
    print("docs %d, tokens %d" % (c["docs"], n))
    print("tokenization: %d docs differ (%d tokens), %.4f%% tokens identical" % (c["tok_docs_bad"], c["tok_bad"], pct(c["tok_bad"])))
    worst = pct(c["tok_bad"])
    for f in FIELDS:
        p = pct(c["tok_bad"] + c["bad_" + f])
        worst = min(worst, p)
        print("%-11s %.4f%% (%d differ)" % (f, p, c["bad_" + f]))
    all_ok = pct(c["tok_bad"] + c["tok_any_bad"])
    print("all fields  %.4f%% of tokens identical" % all_ok)
    print("entities    %d/%d spaCy entities matched exactly, %d predicted" % (c["ents_match"], c["ents_gold"], c["ents_ours"]))
    for d in diffs[: a.show]:
        print("  ", d)
    raise SystemExit(0 if min(worst, all_ok) >= a.min else 1)


if __name__ == "__main__":
    main()
