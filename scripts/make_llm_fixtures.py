#!/usr/bin/env python3
"""Write the llama.cpp reference fixtures for the local (candle) LLM backend.

Run with the throwaway llama.cpp venv's python (bench/llamacpp_venv.sh builds it):

    bench/llamacpp_venv.sh
    bench/.venv-llamacpp/bin/python scripts/make_llm_fixtures.py [--models-dir models]

Writes under worker/tests/fixtures/llm_local/:
  smollm2_tokens.json   llama.cpp token ids of ~40 texts, SmolLM2-135M-Instruct's tokenizer
  gemma3_tokens.json    the same texts, Gemma-3-270m's tokenizer
  gemma3_logits.json    Gemma-3-270m next-token top-5 logits at each of 256 positions of a passage
  smollm2_greedy.json   SmolLM2 greedy ChatML completion (ids, text, top-5 of the first 8 steps)
Each file starts with the llama-cpp-python version and the model file's sha256. Tokenization
uses add_bos=False, special=True (special-token text such as <|im_start|> is parsed as the
special token). Logits are rounded to 4 decimals.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = Path(__file__).resolve().parent.parent
SMOLLM2 = "SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m/gemma-3-270m-q4_k_m.gguf"

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Albert Einstein published four groundbreaking papers in 1905.",
    "The city has a population of 3.2 million people.",
    "The repair cost $4,500, which was paid on 2024-01-15.",
    "In 1969, Apollo 11 landed on the Moon; 12 people have walked there since.",
    "Pi is approximately 3.14159, and e is about 2.71828.",
    "Revenue grew 50% to 1,000,000 units (up from 666,667).",
    "Wait... what?! Really?? Yes -- really.",
    "\"Quoted,\" she said; 'single quotes' (parentheses) [brackets] {braces}.",
    "Don't, can't, won't, it's, we'll, they're, I'd.",
    "The U.S.A. and the U.K. signed the treaty at 10:30 a.m.",
    "two  spaces,   three spaces,    four spaces.",
    "trailing spaces   ",
    " Leading space",
    "  Two leading spaces",
    "Line one\nLine two\n\nLine four after a blank line\n",
    "Tabs\tbetween\twords\tand a newline\r\nwith CRLF.",
    "café, naïve, résumé, façade, jalapeño, Zürich",
    "An em dash — and an en dash – and an ellipsis …",
    "Emoji: 😀 👍🏽 🇫🇷 ❤️ 🚀",
    "日本語のテキストを分割します。",
    "中文分词测试，北京是中国的首都。",
    "한국어 문장입니다.",
    "Привет, мир! Это тест.",
    "مرحبا بالعالم",
    "Math: x² + y² = z², ½ + ¼ = ¾, α β γ ∑ ∞",
    "e-mail me at john.doe@example.com or visit https://example.org/path?q=1&r=2",
    "#hashtag @username ~tilde ^caret |pipe \\backslash",
    "fn main() { println!(\"hello, world\"); }",
    "def f(x):\n    return x ** 2  # square\n",
    "ALL CAPS SENTENCE WITH NUMBERS 123456789",
    "MixedCase camelCase snake_case kebab-case PascalCase",
    "The Golden Gate Bridge, completed in 1937, spans 2,737 meters.",
    "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
    "<|im_start|>user\nHello<|im_end|>\n",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
    "<bos>literal bos marker</s><eos>",
    "a",
    "",
]

# ~200 words of ordinary prose for the Gemma-3 logits fixture (must give >= 256 tokens).
PASSAGE = (
    "On a cold morning in early spring, the old iron bridge that carried the county road "
    "across the river gave way without warning. A delivery truck had just reached the far "
    "bank when the central span twisted, groaned, and slid into the brown water below. "
    "Nobody was killed, but the town was cut in two, and for weeks children from the east "
    "side took a long bus ride around the valley to reach their school. Engineers who "
    "examined the wreckage found that rust had eaten through several of the rivets that "
    "held the main girders together. The bridge had been inspected only four years earlier, "
    "and the report had warned that repairs were overdue, yet the money was never found.\n\n"
    "In the same library where the inspection report was eventually discovered, a retired "
    "physics teacher gave a public lecture about the year 1905. That year, a young patent "
    "clerk in Bern named Albert Einstein published four papers that changed science. One "
    "explained the photoelectric effect and suggested that light arrives in small packets "
    "of energy. Another described the random motion of tiny particles suspended in water, "
    "which helped to convince sceptics that atoms were real. The third introduced special "
    "relativity, and the fourth contained the famous relation between mass and energy. The "
    "teacher reminded the audience that Einstein did this work in his spare time, while "
    "holding a full-time job, and that his ideas were not accepted immediately. Several "
    "older professors rejected them for years, and the Nobel Prize he finally received in "
    "1921 was awarded for the photoelectric effect rather than for relativity. After the "
    "lecture, people stayed to ask questions about clocks, trains, and the speed of light."
)

SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
SMOLLM2_PROMPT = (
    f"<|im_start|>system\n{SMOLLM2_SYSTEM}<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def gguf_tokenizer_metadata(path: Path) -> dict:
    """Scalar tokenizer.* keys of a GGUF file (token/score/type/merge arrays left out;
    their lengths are reported instead)."""
    try:
        from gguf import GGUFReader
    except ImportError:
        return {}
    out = {}
    reader = GGUFReader(str(path))
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer.") and name != "general.architecture":
            continue
        if len(field.types) > 1 or (field.types and field.types[0].name == "ARRAY"):
            out[name] = f"<array of {len(field.data)}>"
            continue
        val = field.parts[field.data[0]]
        if field.types and field.types[0].name == "STRING":
            out[name] = bytes(val).decode("utf-8")
        else:
            v = val.tolist()
            out[name] = v[0] if isinstance(v, list) and len(v) == 1 else v
    return dict(sorted(out.items()))


def header(model_path: Path) -> dict:
    return {
        "generator": "scripts/make_llm_fixtures.py",
        "llama_cpp_python": llama_cpp.__version__,
        "model_file": model_path.name,
        "model_sha256": sha256_of(model_path),
    }


def tok(llm: Llama, text: str, add_bos: bool = False) -> list[int]:
    return [int(t) for t in llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)]


def special_ids(llm: Llama, names: list[str]) -> dict:
    out = {}
    for n in names:
        ids = tok(llm, n)
        out[n] = ids[0] if len(ids) == 1 else ids
    return out


def token_fixture(model_path: Path, specials: list[str]) -> dict:
    llm = Llama(model_path=str(model_path), vocab_only=True, verbose=False)
    hello_bos = tok(llm, "Hello", add_bos=True)
    hello = tok(llm, "Hello")
    data = header(model_path)
    data["tokenize_call"] = "Llama(vocab_only=True).tokenize(text.encode(), add_bos=False, special=True)"
    data["bos_id"] = int(llm.token_bos())
    data["eos_id"] = int(llm.token_eos())
    data["add_bos_behaviour"] = {
        "add_bos_true_prepends_bos": hello_bos[:1] == [llm.token_bos()] and hello_bos[1:] == hello,
        "hello_add_bos_false": hello,
        "hello_add_bos_true": hello_bos,
    }
    data["special_token_ids"] = special_ids(llm, specials)
    data["gguf_tokenizer_metadata"] = gguf_tokenizer_metadata(model_path)
    data["cases"] = [{"text": t, "ids": tok(llm, t)} for t in TEXTS]
    del llm
    return data


def top5(row: np.ndarray) -> list[dict]:
    idx = np.argpartition(-row, 5)[:5]
    idx = idx[np.argsort(-row[idx], kind="stable")]
    return [{"id": int(i), "logit": round(float(row[i]), 4)} for i in idx]


def logsumexp(row: np.ndarray) -> float:
    m = float(row.max())
    return round(m + math.log(float(np.exp(row.astype(np.float64) - m).sum())), 4)


def logits_row(llm: Llama, i: int) -> np.ndarray:
    """Row i of the logits of the last evaluated batch (-1: its last token), read from
    llama.cpp itself.

    The models are run with n_ubatch=1 (every token through llama.cpp's one-token
    path): on an AVX-512/AMX machine llama-cpp-python 0.3.16's batched path gave
    SmolLM2 logits up to 18 away from a NumPy forward pass of the dequantised weights
    (top logit 31.15 where NumPy gives 25.33), while with n_ubatch 1 or 8 it agrees
    with NumPy to within 1-2 (activation quantisation)."""
    import llama_cpp
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, i)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float32).copy()


def logits_after_eval(llm: Llama, n: int) -> np.ndarray:
    """The logits rows of the n tokens of the last evaluated batch (n x n_vocab)."""
    return np.stack([logits_row(llm, i) for i in range(n)])


def gemma_logits_fixture(model_path: Path, threads: int) -> dict:
    # An f32 KV cache and no flash attention: the reference as close to exact arithmetic
    # as llama.cpp gets (its default f16 cache and CPU flash attention round K, V and Q
    # to half precision, which moves logits by tenths where two tokens are nearly tied).
    llm = Llama(model_path=str(model_path), logits_all=True, n_ctx=512, n_threads=threads,
                n_threads_batch=threads, n_batch=512, n_ubatch=1, type_k=0, type_v=0,
                flash_attn=False, verbose=False)
    passage_ids = tok(llm, PASSAGE)
    if len(passage_ids) < 257:
        raise SystemExit(f"error: passage gives only {len(passage_ids)} tokens; need >= 257")
    bos = int(llm.token_bos())
    assert bos == 2, bos
    ids = [bos] + passage_ids[:255]
    assert len(ids) == 256
    llm.reset()
    llm.eval(ids)
    scores = logits_after_eval(llm, len(ids))
    assert scores.shape == (256, llm.n_vocab()), scores.shape
    data = header(model_path)
    data["call"] = ("Llama(logits_all=True, n_ctx=512, n_batch=512).eval(ids) in one batch; "
                    "top5[i] = largest logits of the next-token distribution after ids[:i+1]")
    data["n_vocab"] = int(llm.n_vocab())
    data["passage_tokens"] = len(passage_ids)
    data["passage"] = PASSAGE
    data["ids"] = ids
    data["top5"] = [top5(scores[i]) for i in range(256)]
    data["logsumexp"] = [logsumexp(scores[i]) for i in range(256)]
    del llm
    return data


def smollm2_greedy_fixture(model_path: Path, threads: int, max_tokens: int = 64) -> dict:
    llm = Llama(model_path=str(model_path), logits_all=True, n_ctx=512, n_threads=threads,
                n_threads_batch=threads, n_batch=512, n_ubatch=1, verbose=False)
    prompt_ids = tok(llm, SMOLLM2_PROMPT)
    im_end = tok(llm, "<|im_end|>")
    assert len(im_end) == 1, im_end
    im_end = im_end[0]
    eos = int(llm.token_eos())
    llm.reset()
    llm.eval(prompt_ids)
    generated: list[int] = []
    steps_top5 = []
    stopped_by = "max_tokens"
    while len(generated) < max_tokens:
        row = logits_row(llm, -1)
        if len(steps_top5) < 8:
            steps_top5.append(top5(row))
        nxt = int(np.argmax(row))
        generated.append(nxt)
        if nxt in (im_end, eos):
            stopped_by = "<|im_end|>" if nxt == im_end else "eos"
            break
        llm.eval([nxt])
    body = generated[:-1] if stopped_by != "max_tokens" else generated
    text = llm.detokenize(body).decode("utf-8", errors="replace")

    # Cross-check against llama.cpp's own sampler (top_k=1, no repeat penalty).
    llm.reset()
    ref = llm.create_completion(prompt=prompt_ids, max_tokens=max_tokens, temperature=0.0,
                                top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, seed=0)
    ref_text = ref["choices"][0]["text"]

    data = header(model_path)
    data["prompt"] = SMOLLM2_PROMPT
    data["prompt_ids"] = prompt_ids
    data["decoding"] = "greedy (argmax of llama.cpp logits), max_tokens %d, stop at <|im_end|>" % max_tokens
    data["im_end_id"] = im_end
    data["eos_id"] = eos
    data["generated_ids"] = generated
    data["stopped_by"] = stopped_by
    data["text"] = text
    data["create_completion_text"] = ref_text
    data["create_completion_agrees"] = ref_text == text
    data["top5_first_steps"] = steps_top5
    del llm
    return data


def dumps(data: dict) -> str:
    """JSON with one top-level key per line, lists of objects/lists one element per line,
    and lists of scalars (token ids) on one line: small and diff-friendly."""
    def one(v) -> str:
        return json.dumps(v, ensure_ascii=False)
    parts = []
    for k, v in data.items():
        if isinstance(v, list) and v and isinstance(v[0], (dict, list)):
            body = ",\n".join("  " + one(x) for x in v)
            parts.append(f" {one(k)}: [\n{body}\n ]")
        elif isinstance(v, dict):
            body = ",\n".join(f"  {one(kk)}: {one(vv)}" for kk, vv in v.items())
            parts.append(f" {one(k)}: {{\n{body}\n }}")
        else:
            parts.append(f" {one(k)}: {one(v)}")
    out = "{\n" + ",\n".join(parts) + "\n}\n"
    assert json.loads(out) == data
    return out


def write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(data))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} "
          f"({path.stat().st_size} bytes)", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=ROOT / "models")
    ap.add_argument("--out", type=Path, default=ROOT / "worker/tests/fixtures/llm_local")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    smol = args.models_dir / SMOLLM2
    gemma = args.models_dir / GEMMA3
    for p in (smol, gemma):
        if not p.exists():
            raise SystemExit(f"error: {p} missing; run scripts/fetch_models.py --models-dir models")
    chatml = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    gemma_sp = ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<pad>", "<unk>"]
    write(args.out / "smollm2_tokens.json", token_fixture(smol, chatml))
    write(args.out / "gemma3_tokens.json", token_fixture(gemma, gemma_sp))
    write(args.out / "gemma3_logits.json", gemma_logits_fixture(gemma, args.threads))
    write(args.out / "smollm2_greedy.json", smollm2_greedy_fixture(smol, args.threads))


if __name__ == "__main__":
    main()
