"""Run real spaCy on a JSONL of texts: either dump golden-format records (parity) or
time nlp.pipe (speed). Runs inside bench/.venv-spacy.

usage: python spacy_run.py dump  MODEL_DIR IN.jsonl OUT.jsonl
       python spacy_run.py speed MODEL_DIR IN.jsonl N_PROCESS
"""
import json
import sys
import time

import spacy


def record(i, doc):
    toks = [{"i": t.i, "text": t.text, "idx": t.idx, "ws": bool(t.whitespace_), "tag": t.tag_,
             "pos": t.pos_, "dep": t.dep_, "head": t.head.i, "morph": str(t.morph),
             "sent_start": bool(t.is_sent_start), "ent_iob": t.ent_iob_, "ent_type": t.ent_type_}
            for t in doc]
    ents = [{"start": e.start, "end": e.end, "start_char": e.start_char, "end_char": e.end_char,
             "label": e.label_, "text": e.text} for e in doc.ents]
    return {"id": i, "text": doc.text, "tokens": toks, "ents": ents,
            "sents": [[s.start, s.end] for s in doc.sents]}


def main():
    mode, model, inp = sys.argv[1:4]
    texts = [json.loads(line) for line in open(inp, encoding="utf8")]
    nlp = spacy.load(model)
    if mode == "dump":
        with open(sys.argv[4], "w", encoding="utf8") as f:
            for rec, doc in zip(texts, nlp.pipe([t["text"] for t in texts], batch_size=256)):
                f.write(json.dumps(record(rec["id"], doc), ensure_ascii=False) + "\n")
        return
    n_process = int(sys.argv[4])
    words = sum(len(t["text"].split()) for t in texts)
    strs = [t["text"] for t in texts]
    list(nlp.pipe(strs[:200]))  # warm-up
    t0 = time.perf_counter()
    n_tokens = sum(len(d) for d in nlp.pipe(strs, batch_size=256, n_process=n_process))
    secs = time.perf_counter() - t0
    print(json.dumps({"spacy": spacy.__version__, "n_process": n_process, "texts": len(strs),
                      "words": words, "tokens": n_tokens, "seconds": secs, "words_per_s": words / secs}))


if __name__ == "__main__":
    main()
