"""Real spaCy's sentence recognizer (`senter`) on texts of the shared corpora: the golden
fixture of credence's senter port (worker/tests/fixtures/senter_golden.jsonl). Runs inside
bench/.venv-spacy (bench/senter_golden.sh builds it).

The pipeline as the paper's sentence-split baseline runs it: en_core_web_sm with the
parser disabled and `senter` enabled, so `doc.sents` comes from senter alone. The fixture
holds each text's source and position and its sentences as code-point spans, never the
corpus text itself (the test reads the texts from ../shared/data).

usage: python senter_golden.py MODEL_DIR SHARED_DATA OUT.jsonl
"""
import csv
import json
import sys

import spacy

# AG News test descriptions: news leads of one to four sentences, with the corpus's own
# noise (`\` line breaks, `#36;` entities, double spaces).
AG_NEWS = 600


def texts(shared):
    with open(f"{shared}/spacy-golden/en_core_web_sm-golden.jsonl", encoding="utf8") as f:
        for line in f:
            rec = json.loads(line)
            yield "spacy-golden", rec["id"], rec["text"]
    with open(f"{shared}/ag_news_csv/test.csv", encoding="utf8", newline="") as f:
        for i, row in enumerate(csv.reader(f)):
            if i == AG_NEWS:
                break
            yield "ag_news_csv", i, row[2]


def main():
    model, shared, out = sys.argv[1:4]
    nlp = spacy.load(model, disable=["parser"])
    nlp.enable_pipe("senter")
    items = list(texts(shared))
    with open(out, "w", encoding="utf8") as f:
        for (source, key, _), doc in zip(items, nlp.pipe([t for _, _, t in items])):
            sents = [[s.start_char, s.end_char] for s in doc.sents]
            f.write(json.dumps({"source": source, "id": key, "sents": sents}) + "\n")
    print(f"spaCy {spacy.__version__}: {len(items)} texts, pipeline {nlp.pipe_names}")


if __name__ == "__main__":
    main()
