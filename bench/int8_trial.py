"""Would 8-bit products keep the encoder's vectors? A trial in sentence-transformers (not
credence): every linear layer of all-MiniLM-L6-v2 (or the LAYERS whose name contains a
given text) computes from its input and weights rounded to int8, in float64 so that only
the rounding differs, and the pooled, normalised vectors are compared with the model's
own f32 vectors by cosine. Schemes:
  rowwise   activations per row as u8 with a zero point (what `vpdpbusd` multiplies),
            weights per output column as symmetric int8;
  blockG    activations and weights symmetric int8 per block of G along the depth
            (llama.cpp's Q8_0 at G=32), e.g. block32 or block16.
usage: bench/.venv-st/bin/python bench/int8_trial.py SENTENCES.jsonl MODEL_DIR SCHEME [LAYERS]
(SENTENCES.jsonl from bench/sentences.py; bench/embed builds bench/.venv-st.)"""
import json
import sys

import numpy as np
import torch
from sentence_transformers import SentenceTransformer


def rowwise(x, w):
    lo = x.amin(dim=-1, keepdim=True).clamp(max=0)
    hi = x.amax(dim=-1, keepdim=True).clamp(min=0)
    s = (hi - lo).clamp(min=1e-12) / 255.0
    z = torch.round(-lo / s)
    xq = torch.round(x / s + z).clamp(0, 255)
    ws = w.abs().amax(dim=1, keepdim=True) / 127.0
    wq = torch.round(w / ws).clamp(-127, 127)
    return ((xq - z) @ wq.T) * s * ws.T


def blocks(t, g):
    shape = t.shape
    t = t.reshape(*shape[:-1], shape[-1] // g, g)
    s = t.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / 127.0
    return (torch.round(t / s).clamp(-127, 127) * s).reshape(shape)


def main():
    path, model_dir, scheme = sys.argv[1:4]
    only = sys.argv[4] if len(sys.argv) > 4 else ""
    torch.set_num_threads(1)
    texts = [json.loads(line)["text"] for line in open(path)]
    model = SentenceTransformer(model_dir, device="cpu")
    ref = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    changed = 0
    for name, layer in model.named_modules():
        if not isinstance(layer, torch.nn.Linear) or only not in name:
            continue
        w = layer.weight.detach().double()
        b = layer.bias.detach().double()
        if scheme == "rowwise":
            layer.forward = lambda x, w=w, b=b: (rowwise(x.double(), w) + b).to(x.dtype)
        elif scheme.startswith("block"):
            g = int(scheme[len("block"):])
            wq = blocks(w, g)
            layer.forward = lambda x, wq=wq, b=b, g=g: (blocks(x.double(), g) @ wq.T + b).to(x.dtype)
        else:
            sys.exit(f"unknown scheme {scheme!r}: rowwise or blockG")
        changed += 1
    got = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    cos = (ref * got).sum(axis=1)
    print(json.dumps({"scheme": scheme, "layers": changed, "sentences": len(texts),
                      "min": round(float(cos.min()), 6), "p1": round(float(np.percentile(cos, 1)), 6),
                      "median": round(float(np.median(cos)), 6)}))


if __name__ == "__main__":
    main()
