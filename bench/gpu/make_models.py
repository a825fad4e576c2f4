"""Random-weight models at the paper's real shapes, written where the rehearsal runs (no
download): a Hugging Face safetensors folder (bf16) per model, built with transformers'
own classes so the tensor names and the config are what a real checkpoint has, plus a
word-level tokenizer ("w0".."wN", the model's vocabulary size) and a ChatML template, so
that credence's loader takes the folder as it takes a published one. Prints one JSON line
per model. The rehearsal's speed figures do not depend on the weights' values.

    python3 bench/gpu/make_models.py OUT_DIR [--models qwen3-8b,phi3-mini] [--tiny]

--tiny writes the same architectures at toy sizes (CI runs the rehearsal's logic with them
on the CPU).
"""
import argparse
import json
import os
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
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    shape = dict(SHAPES[name])
    if tiny:
        shape.update(TINY)
        if "head_dim" in shape:
            shape["head_dim"] = 16
        if shape["model_type"] == "phi3":
            shape["num_key_value_heads"] = shape["num_attention_heads"]
    model_type = shape.pop("model_type")
    config = AutoConfig.for_model(model_type, **shape)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.time()
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    model.save_pretrained(folder, max_shard_size="20GB")
    with open(os.path.join(folder, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(config.vocab_size), f)
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHATML, "eos_token": "<|im_end|>",
                   "add_bos_token": False}, f)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"model": name, "folder": folder, "params": params,
                      "seconds": round(time.time() - started, 1)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default="qwen3-8b,phi3-mini")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    for name in args.models.split(","):
        if name not in SHAPES:
            sys.exit(f"make_models.py: unknown model {name!r} (known: {', '.join(SHAPES)})")
        make(name, args.out, args.tiny)


if __name__ == "__main__":
    main()
