"""Tiny random-weight model folders written with the standard library alone (no torch, no
numpy), for the rehearsal's --tiny run, which CI runs on a machine without either: the
same tensor names and config fields as transformers writes for Qwen3, Phi-3 and BERT, so
credence loads them as it loads the real shapes' folders on the GPU machine.

    write_causal(folder, model_type, shape)   # config.json + model.safetensors (bf16)
    write_bert(folder, shape)                  # config.json + model.safetensors (f32)
"""
import json
import os
import random
import struct


def _bf16(values):
    """bf16 bytes of floats: the upper half of each float32 (round toward zero)."""
    raw = struct.pack(f"<{len(values)}f", *values)
    return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))


def write_safetensors(path, tensors, dtype, seed=0):
    """`tensors`: (name, shape, kind) with kind "weight" (small normal values), "ones"
    (norm scales) or "zeros" (biases); written as F32 or BF16."""
    r = random.Random(seed)
    blobs, header, offset, params = [], {}, 0, 0
    for name, shape, kind in tensors:
        count = 1
        for d in shape:
            count *= d
        params += count
        if kind == "ones":
            values = [1.0] * count
        elif kind == "zeros":
            values = [0.0] * count
        else:
            values = [r.gauss(0.0, 0.05) for _ in range(count)]
        blob = _bf16(values) if dtype == "BF16" else struct.pack(f"<{count}f", *values)
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for blob in blobs:
            f.write(blob)
    return params


def write_causal(folder, model_type, shape):
    """A Qwen3 or Phi-3 folder at `shape` (transformers' config names); returns params."""
    h, layers = shape["hidden_size"], shape["num_hidden_layers"]
    heads, kv = shape["num_attention_heads"], shape["num_key_value_heads"]
    d = shape.get("head_dim", h // heads)
    ffn, vocab = shape["intermediate_size"], shape["vocab_size"]
    tensors = [("model.embed_tokens.weight", (vocab, h), "weight")]
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors += [(p + "input_layernorm.weight", (h,), "ones"),
                    (p + "post_attention_layernorm.weight", (h,), "ones"),
                    (p + "self_attn.o_proj.weight", (h, heads * d), "weight"),
                    (p + "mlp.down_proj.weight", (h, ffn), "weight")]
        if model_type == "phi3":
            tensors += [(p + "self_attn.qkv_proj.weight", ((heads + 2 * kv) * d, h), "weight"),
                        (p + "mlp.gate_up_proj.weight", (2 * ffn, h), "weight")]
        else:
            tensors += [(p + "self_attn.q_proj.weight", (heads * d, h), "weight"),
                        (p + "self_attn.k_proj.weight", (kv * d, h), "weight"),
                        (p + "self_attn.v_proj.weight", (kv * d, h), "weight"),
                        (p + "self_attn.q_norm.weight", (d,), "ones"),
                        (p + "self_attn.k_norm.weight", (d,), "ones"),
                        (p + "mlp.gate_proj.weight", (ffn, h), "weight"),
                        (p + "mlp.up_proj.weight", (ffn, h), "weight")]
    tensors += [("model.norm.weight", (h,), "ones"), ("lm_head.weight", (vocab, h), "weight")]
    os.makedirs(folder, exist_ok=True)
    architecture = {"qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM"}[model_type]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": [architecture], "model_type": model_type,
                   "torch_dtype": "bfloat16", **shape}, f)
    return write_safetensors(os.path.join(folder, "model.safetensors"), tensors, "BF16")


def write_bert(folder, shape):
    """A BERT encoder folder at `shape` (transformers' config names); returns params."""
    h, ffn = shape["hidden_size"], shape["intermediate_size"]
    tensors = [("embeddings.word_embeddings.weight", (shape["vocab_size"], h), "weight"),
               ("embeddings.position_embeddings.weight", (shape["max_position_embeddings"], h), "weight"),
               ("embeddings.token_type_embeddings.weight", (2, h), "weight"),
               ("embeddings.LayerNorm.weight", (h,), "ones"),
               ("embeddings.LayerNorm.bias", (h,), "zeros")]
    for i in range(shape["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            tensors += [(p + f"attention.self.{part}.weight", (h, h), "weight"),
                        (p + f"attention.self.{part}.bias", (h,), "zeros")]
        tensors += [(p + "attention.output.dense.weight", (h, h), "weight"),
                    (p + "attention.output.dense.bias", (h,), "zeros"),
                    (p + "attention.output.LayerNorm.weight", (h,), "ones"),
                    (p + "attention.output.LayerNorm.bias", (h,), "zeros"),
                    (p + "intermediate.dense.weight", (ffn, h), "weight"),
                    (p + "intermediate.dense.bias", (ffn,), "zeros"),
                    (p + "output.dense.weight", (h, ffn), "weight"),
                    (p + "output.dense.bias", (h,), "zeros"),
                    (p + "output.LayerNorm.weight", (h,), "ones"),
                    (p + "output.LayerNorm.bias", (h,), "zeros")]
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
                   "layer_norm_eps": 1e-12, "type_vocab_size": 2, "pad_token_id": 0,
                   "position_embedding_type": "absolute", **shape}, f)
    return write_safetensors(os.path.join(folder, "model.safetensors"), tensors, "F32")
