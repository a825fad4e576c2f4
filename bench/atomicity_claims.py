"""The atomicity parity check's three steps (see atomicity_parity.sh):

  sample  SHARED_DATA OUT.jsonl [--count N] [--seed S]   claims from the shared data (stdlib)
  spacy   MODEL_DIR IN.jsonl OUT.jsonl                  the three rules on real spaCy (venv)
  compare SPACY.jsonl CREDENCE.jsonl [--show N]          per-claim agreement; exit 1 on any diff

The rules are PAPER.md "Decided here" (one boundary node per hit, token order):
  cc_subj    a token with dep conj whose head has an nsubj/nsubjpass child and that has its own;
  advcl      a token with dep advcl (with --advcl-requires-subject: only one with a subject child);
  relcl_subj a token with dep relcl that has an nsubj/nsubjpass child.
"""
import argparse
import collections
import json
import os
import random
import sys

SUBJ = ("nsubj", "nsubjpass")


def fever(d):
    with open(os.path.join(d, "fever", "paper_dev.jsonl"), encoding="utf8") as f:
        for line in f:
            yield json.loads(line)["claim"]


def scifact(d):
    for name in ("claims_train.jsonl", "claims_dev.jsonl", "claims_test.jsonl"):
        with open(os.path.join(d, "scifact", name), encoding="utf8") as f:
            for line in f:
                yield json.loads(line)["claim"]


def covidfact(d):
    with open(os.path.join(d, "covidfact", "COVIDFACT_dataset.jsonl"), encoding="utf8") as f:
        for line in f:
            yield json.loads(line)["claim"]


def liar(d):
    for name in ("test2.jsonl", "val2.jsonl"):
        with open(os.path.join(d, "liar-plus", "dataset", "jsonl", name), encoding="utf8") as f:
            for line in f:
                yield json.loads(line)["claim"]


def wiki_split(d):
    # The complex (unsplit) sentence: where compound boundaries are common.
    with open(os.path.join(d, "wiki-split", "test.tsv"), encoding="utf8") as f:
        for line in f:
            yield line.split("\t")[0].strip()


SOURCES = {"fever": fever, "scifact": scifact, "covidfact": covidfact, "liar-plus": liar,
           "wiki-split": wiki_split}


def sample(a):
    rng = random.Random(a.seed)
    per = a.count // len(SOURCES) + 1
    rows = []
    for name, fn in SOURCES.items():
        texts = sorted({t.strip() for t in fn(a.src) if t.strip()})
        rows += [(name, t) for t in rng.sample(texts, min(per, len(texts)))]
    rng.shuffle(rows)
    rows = rows[:a.count]
    with open(a.out, "w", encoding="utf8") as f:
        for i, (source, text) in enumerate(rows):
            f.write(json.dumps({"id": i, "source": source, "text": text}, ensure_ascii=False) + "\n")
    print("wrote %d claims to %s" % (len(rows), a.out))


def boundaries(doc, advcl_requires_subject):
    def has_subj(t):
        return any(c.dep_ in SUBJ for c in t.children)

    out = []
    for t in doc:
        if t.dep_ == "conj" and has_subj(t.head) and has_subj(t):
            out.append({"rule": "cc_subj", "token_i": t.i})
        elif t.dep_ == "advcl" and (not advcl_requires_subject or has_subj(t)):
            out.append({"rule": "advcl", "token_i": t.i})
        elif t.dep_ == "relcl" and has_subj(t):
            out.append({"rule": "relcl_subj", "token_i": t.i})
    return out


def run_spacy(a):
    import spacy

    rows = [json.loads(line) for line in open(a.inp, encoding="utf8")]
    nlp = spacy.load(a.model)
    with open(a.out, "w", encoding="utf8") as f:
        for row, doc in zip(rows, nlp.pipe([r["text"] for r in rows], batch_size=256)):
            b = boundaries(doc, a.advcl_requires_subject)
            rec = {"id": row["id"], "atomic": not b, "n_viol": len(b), "boundaries": b}
            f.write(json.dumps(rec) + "\n")


def compare(a):
    def load(path):
        return {r["id"]: r for r in map(json.loads, open(path, encoding="utf8"))}

    ref, got = load(a.spacy), load(a.credence)
    diffs = []
    for k, r in ref.items():
        g = got.get(k)
        same = g is not None and all(g.get(f) == r[f] for f in ("atomic", "n_viol", "boundaries"))
        if not same:
            diffs.append((k, r, g))
    extra = set(got) - set(ref)
    rules = collections.Counter(b["rule"] for r in ref.values() for b in r["boundaries"])
    non_atomic = sum(not r["atomic"] for r in ref.values())
    print("claims %d | non-atomic (spaCy) %d | boundary nodes: %s"
          % (len(ref), non_atomic, ", ".join("%s %d" % kv for kv in sorted(rules.items()))))
    for k, r, g in diffs[:a.show]:
        print("DIFF id=%s\n  spacy    %s\n  credence %s" % (k, json.dumps(r), json.dumps(g)))
    agree = len(ref) - len(diffs)
    print("agreement: %d/%d claims (%.2f%%)%s" % (agree, len(ref), 100.0 * agree / max(len(ref), 1),
          "; %d ids only in credence output" % len(extra) if extra else ""))
    return 1 if diffs or extra else 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("src")
    s.add_argument("out")
    s.add_argument("--count", type=int, default=2000)
    s.add_argument("--seed", type=int, default=13)
    p = sub.add_parser("spacy")
    p.add_argument("model")
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--advcl-requires-subject", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("spacy")
    c.add_argument("credence")
    c.add_argument("--show", type=int, default=30)
    a = ap.parse_args()
    if a.cmd == "sample":
        sample(a)
    elif a.cmd == "spacy":
        run_spacy(a)
    else:
        sys.exit(compare(a))


if __name__ == "__main__":
    main()
