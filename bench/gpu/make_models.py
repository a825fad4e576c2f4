"""Random-weight models at the paper's real shapes, written where the rehearsal runs (no
download). Prints one JSON line per model. The rehearsal's speed figures do not depend on
the weights' values.

- qwen3-8b, phi3-mini: a Hugging Face safetensors folder (bf16) per model, built with
  transformers' own classes so the tensor names and the config are what a real checkpoint
  has, plus a word-level tokenizer ("w0".."wN", the model's vocabulary size) and a ChatML
  template, so that credence's loader takes the folder as it takes a published one.
- gemma3-12b-q4k: OUT_DIR/gemma3-12b-q4k/model.gguf, a GGUF v3 file at
  google/gemma-3-12b-it's text shape laid out as llama.cpp writes a Q4_K_M file
  (token_embd Q6_K, tied LM head; every other matrix Q4_K; norms F32 with Gemma's +1
  already added), with a SentencePiece vocabulary ("w1".."w31999" and "\u2581w1".. as
  whole pieces, byte fallback, 262,144 tokens) and a Gemma chat template. Written by
  numpy alone (no torch, no gguf package), tensor by tensor, streamed to disk. Pass the
  file, not its folder, to credence's --model (a folder is read as safetensors).

    python3 bench/gpu/make_models.py OUT_DIR [--models qwen3-8b,phi3-mini,gemma3-12b-q4k] [--tiny]

--tiny writes the same architectures at toy sizes with the standard library alone (no
torch, no numpy: tiny_weights.py), as CI runs the rehearsal's logic on the CPU; the tiny
GGUF keeps every matrix's rows whole Q4_K blocks of 256.
"""
import argparse
import json
import math
import os
import random
import struct
import sys
import time

SHAPES = {
    # Qwen/Qwen3-8B config.json
    "qwen3-8b": dict(model_type="qwen3", hidden_size=4096, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                     intermediate_size=12288, vocab_size=151936, rope_theta=1000000.0,
                     max_position_embeddings=40960, rms_norm_eps=1e-6,
                     tie_word_embeddings=False, hidden_act="silu"),
    # microsoft/Phi-3-mini-4k-instruct config.json
    "phi3-mini": dict(model_type="phi3", hidden_size=3072, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=32,
                      intermediate_size=8192, vocab_size=32064, rope_theta=10000.0,
                      max_position_embeddings=4096, original_max_position_embeddings=4096,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu",
                      pad_token_id=32000),
}
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=128, vocab_size=512)
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }} {{ m.content }} <|im_end|> "
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}")


def tokenizer_json(vocab):
    special = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
    words = {"<|im_start|>": 0, "<|im_end|>": 1, "[UNK]": 2}
    words.update({f"w{i}": i for i in range(3, vocab)})
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [special(0, "<|im_start|>"), special(1, "<|im_end|>")],
            "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": None, "decoder": None,
            "model": {"type": "WordLevel", "vocab": words, "unk_token": "[UNK]"}}


def make(name, out, tiny):
    shape = dict(SHAPES[name])
    if tiny:
        shape.update(TINY)
        if "head_dim" in shape:
            shape["head_dim"] = 16
        if shape["model_type"] == "phi3":
            shape["num_key_value_heads"] = shape["num_attention_heads"]
            # Phi-3's special ids (32000, 32007) lie past a tiny vocabulary.
            shape.update(pad_token_id=1, eos_token_id=1, bos_token_id=0)
    model_type = shape.pop("model_type")
    started = time.time()
    folder = os.path.join(out, name)
    if tiny:
        # The standard library alone, as CI has it (tiny_weights.py).
        from tiny_weights import write_causal
        params = write_causal(folder, model_type, shape)
    else:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
        config = AutoConfig.for_model(model_type, **shape)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        torch.manual_seed(0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        os.makedirs(folder, exist_ok=True)
        model.save_pretrained(folder, max_shard_size="20GB")
        params = sum(p.numel() for p in model.parameters())
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(shape["vocab_size"]), f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>",
                   "add_bos_token": False}, f)
    print(json.dumps({"model": name, "folder": folder, "params": params,
                      "seconds": round(time.time() - started, 1)}), flush=True)


# google/gemma-3-12b-it text_config, and the GGUF keys llama.cpp writes for it.
GGUF_SHAPES = {
    "gemma3-12b-q4k": dict(hidden=3840, layers=48, heads=16, kv_heads=8, head_dim=256,
                           ffn=15360, vocab=262144, context=131072, window=1024,
                           pattern=6, rope_base=1000000.0, rope_scale=8.0, rms_eps=1e-6),
}
# Every matrix's row (hidden, heads x head_dim, ffn) a whole number of 256-value blocks;
# pattern 2 so that one of the two layers attends globally.
GGUF_TINY = dict(hidden=256, layers=2, heads=4, kv_heads=2, head_dim=64, ffn=512,
                 vocab=1024, context=4096, window=1024, pattern=2)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = m.role %}{% endif %}"
    "<start_of_turn>{{ role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")

# ggml tensor types: (id, values per block, bytes per block)
F32, Q4_K, Q6_K = (0, 1, 4), (12, 256, 144), (14, 256, 210)
# GGUF metadata value types
U32, I32, F32V, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
# llama.cpp token types
NORMAL, UNKNOWN, CONTROL, BYTE = 1, 2, 3, 6
ALIGN = 32


def spm_vocab(size):
    """SentencePiece pieces: Gemma's control tokens, byte fallback, single characters, and
    "w1".."w31999" with and without the word-start "\u2581" (every prefix of such a word is
    a piece, so a rehearsal word merges into one token), then placeholders up to `size`."""
    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [CONTROL, CONTROL, CONTROL, UNKNOWN, CONTROL, CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [BYTE] * 256
    chars = ["\u2581", "\n"] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    chars += [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [str(d) for d in range(10)]
    tokens += chars + ["\u2581w"]
    types += [NORMAL] * (len(chars) + 1)
    n = 1
    while n < 32000 and len(tokens) + 2 <= size:
        tokens += [f"\u2581w{n}", f"w{n}"]
        types += [NORMAL, NORMAL]
        n += 1
    if len(tokens) > size:
        sys.exit(f"make_models.py: a vocabulary of {size} cannot hold the base pieces")
    tokens += [f"<unused{i}>" for i in range(size - len(tokens))]
    types += [NORMAL] * (size - len(types))
    scores = [0.0 if t in (CONTROL, UNKNOWN, BYTE) else -float(i)
              for i, t in enumerate(types)]
    return tokens, scores, types


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_kv(key, vtype, value):
    """One metadata entry; an ARRAY's value is (element type, list)."""
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == ARRAY:
        etype, items = value
        out += struct.pack("<IQ", etype, len(items))
        if etype == STRING:
            return out + b"".join(gguf_string(x) for x in items)
        code = {U32: "I", I32: "i", F32V: "f"}[etype]
        return out + struct.pack(f"<{len(items)}{code}", *items)
    if vtype == STRING:
        return out + gguf_string(value)
    return out + struct.pack({U32: "<I", I32: "<i", F32V: "<f", BOOL: "<?"}[vtype], value)


def gemma3_tensors(s):
    """(name, dims as [rows, cols] or [n], ggml type) in llama.cpp's gemma3 layout."""
    h, q, kv, f = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["ffn"]
    out = [("token_embd.weight", [s["vocab"], h], Q6_K)]
    for i in range(s["layers"]):
        b = f"blk.{i}."
        out += [(b + "attn_k.weight", [kv, h], Q4_K),
                (b + "attn_k_norm.weight", [s["head_dim"]], F32),
                (b + "attn_norm.weight", [h], F32),
                (b + "attn_output.weight", [h, q], Q4_K),
                (b + "attn_q.weight", [q, h], Q4_K),
                (b + "attn_q_norm.weight", [s["head_dim"]], F32),
                (b + "attn_v.weight", [kv, h], Q4_K),
                (b + "ffn_down.weight", [h, f], Q4_K),
                (b + "ffn_gate.weight", [f, h], Q4_K),
                (b + "ffn_norm.weight", [h], F32),
                (b + "ffn_up.weight", [f, h], Q4_K),
                (b + "post_attention_norm.weight", [h], F32),
                (b + "post_ffw_norm.weight", [h], F32)]
    return out + [("output_norm.weight", [h], F32)]


def tensor_bytes(dims, ggml):
    _, block, block_bytes = ggml
    count = 1
    for d in dims:
        count *= d
    assert dims[-1] % block == 0, (dims, ggml)
    return count // block * block_bytes


def write_tensor(f, dims, ggml, bits):
    """Random blocks with sane scales, in chunks of at most 64 MiB: a Q4_K block's d and
    dmin (dmin = 7.5 d centres its values on 0, its 6-bit scales and mins being uniform),
    a Q6_K block's d (its scales are signed); norms 1 + small noise. `bits` is numpy's
    PCG64 (the real shapes: fast) or a random.Random (--tiny: the standard library alone,
    as CI has it)."""
    d = struct.pack("<e", 1e-4)
    dmin = struct.pack("<e", 7.5e-4)
    if isinstance(bits, random.Random):
        if ggml == F32:
            f.write(struct.pack(f"<{dims[0]}f", *(1.0 + 0.01 * (bits.random() - 0.5)
                                                  for _ in range(dims[0]))))
            return
        block_bytes = ggml[2]
        raw = bytearray(bits.randbytes(tensor_bytes(dims, ggml)))
        for at in range(0, len(raw), block_bytes):
            if ggml == Q4_K:
                raw[at:at + 4] = d + dmin
            else:
                raw[at + 208:at + 210] = d
        f.write(raw)
        return
    import numpy as np
    if ggml == F32:
        w = 1.0 + 0.01 * (bits.random_raw(dims[0]).astype(np.float64) / 2.0**64 - 0.5)
        f.write(w.astype("<f4").tobytes())
        return
    _, _, block_bytes = ggml
    blocks = tensor_bytes(dims, ggml) // block_bytes
    step = max(1, (64 << 20) // block_bytes)
    d = np.frombuffer(d, np.uint8)
    dmin = np.frombuffer(dmin, np.uint8)
    for start in range(0, blocks, step):
        n = min(step, blocks - start)
        raw = bits.random_raw((n * block_bytes + 7) // 8).view(np.uint8)[:n * block_bytes]
        raw = raw.reshape(n, block_bytes)
        if ggml == Q4_K:
            raw[:, 0:2] = d
            raw[:, 2:4] = dmin
        else:
            raw[:, 208:210] = d
        f.write(raw.data)


def make_gguf(name, out, tiny):
    """Writes OUT/NAME/model.gguf (GGUF v3): header, metadata, tensor infos, then each
    tensor's data at its 32-byte-aligned offset, generated and written one at a time."""
    s = dict(GGUF_SHAPES[name])
    if tiny:
        s.update(GGUF_TINY)
    started = time.time()
    tokens, scores, types = spm_vocab(s["vocab"])
    a = "gemma3."
    meta = [
        ("general.architecture", STRING, "gemma3"),
        ("general.name", STRING, f"{name} (random weights)"),
        ("general.alignment", U32, ALIGN),
        ("general.file_type", U32, 15),  # MOSTLY_Q4_K_M
        (a + "context_length", U32, s["context"]),
        (a + "embedding_length", U32, s["hidden"]),
        (a + "block_count", U32, s["layers"]),
        (a + "feed_forward_length", U32, s["ffn"]),
        (a + "attention.head_count", U32, s["heads"]),
        (a + "attention.head_count_kv", U32, s["kv_heads"]),
        (a + "attention.key_length", U32, s["head_dim"]),
        (a + "attention.value_length", U32, s["head_dim"]),
        (a + "attention.layer_norm_rms_epsilon", F32V, s["rms_eps"]),
        (a + "attention.sliding_window", U32, s["window"]),
        (a + "attention.sliding_window_pattern", U32, s["pattern"]),
        (a + "rope.freq_base", F32V, s["rope_base"]),
        (a + "rope.scaling.type", STRING, "linear"),
        (a + "rope.scaling.factor", F32V, s["rope_scale"]),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.pre", STRING, "default"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
        ("tokenizer.ggml.scores", ARRAY, (F32V, scores)),
        ("tokenizer.ggml.token_type", ARRAY, (I32, types)),
        ("tokenizer.ggml.bos_token_id", U32, 2),
        ("tokenizer.ggml.eos_token_id", U32, 1),
        ("tokenizer.ggml.unknown_token_id", U32, 3),
        ("tokenizer.ggml.padding_token_id", U32, 0),
        ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.ggml.add_eos_token", BOOL, False),
        ("tokenizer.ggml.add_space_prefix", BOOL, False),
        ("tokenizer.chat_template", STRING, GEMMA_TEMPLATE),
    ]
    tensors = gemma3_tensors(s)
    header = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(meta))]
    header += [gguf_kv(*m) for m in meta]
    offsets, offset, params = [], 0, 0
    for tname, dims, ggml in tensors:
        offsets.append(offset)
        # ggml lists dimensions innermost first: [cols, rows].
        header.append(gguf_string(tname) + struct.pack("<I", len(dims))
                      + struct.pack(f"<{len(dims)}Q", *reversed(dims))
                      + struct.pack("<IQ", ggml[0], offset))
        offset += -(-tensor_bytes(dims, ggml) // ALIGN) * ALIGN
        params += math.prod(dims)
    header = b"".join(header)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.gguf")
    if tiny:
        bits = random.Random(0)
    else:
        import numpy as np
        bits = np.random.PCG64(0)
    with open(path + ".part", "wb") as f:
        f.write(header + bytes(-len(header) % ALIGN))
        data_start = f.tell()
        for (tname, dims, ggml), at in zip(tensors, offsets):
            f.write(bytes(data_start + at - f.tell()))
            write_tensor(f, dims, ggml, bits)
        f.write(bytes(-(f.tell() - data_start) % ALIGN))
    os.replace(path + ".part", path)
    print(json.dumps({"model": name, "file": path, "params": params,
                      "bytes": os.path.getsize(path),
                      "seconds": round(time.time() - started, 1)}), flush=True)


def main():
    ap = argparse.ArgumentParser(description="Random-weight models for the GPU rehearsal.")
    ap.add_argument("out", help="folder to write OUT/MODEL into")
    ap.add_argument("--models", default="qwen3-8b,phi3-mini",
                    help=f"comma-separated, of: {', '.join([*SHAPES, *GGUF_SHAPES])}")
    ap.add_argument("--tiny", action="store_true", help="toy sizes, for the CPU")
    args = ap.parse_args()
    for name in args.models.split(","):
        if name in GGUF_SHAPES:
            make_gguf(name, args.out, args.tiny)
        elif name in SHAPES:
            make(name, args.out, args.tiny)
        else:
            known = ", ".join([*SHAPES, *GGUF_SHAPES])
            sys.exit(f"make_models.py: unknown model {name!r} (known: {known})")


if __name__ == "__main__":
    main()
