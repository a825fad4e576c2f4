"""A random-weight sentence encoder at BGE-large's shape (BERT, 1024 wide, 24 layers, 16
heads), written where the rehearsal runs (no download): config.json and model.safetensors
(f32) from transformers' own BertModel, a word-level tokenizer ("w0".."wN" plus [CLS] and
[SEP] around every text) and sentence-transformers' module files (CLS pooling, then
normalisation, 512 tokens at most, as BGE's), so that credence and sentence-transformers
load the same folder and see the same tokens. Also writes N sentences of random words
("{"id", "text"}" JSONL) of 8 to 40 words each. Prints one JSON line.

    python3 bench/gpu/make_encoder.py OUT_DIR SENTENCES.jsonl [--n 4000] [--tiny]

--tiny writes a 2-layer, 64-wide encoder with the standard library alone (tiny_weights.py),
as CI runs the rehearsal's logic on the CPU without torch.
"""
import argparse
import json
import os
import random
import time

SHAPE = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
             intermediate_size=4096, vocab_size=30522, max_position_embeddings=512)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, vocab_size=512, max_position_embeddings=512)
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def tokenizer_json(vocab):
    words = {s: i for i, s in enumerate(SPECIALS)}
    words.update({f"w{i}": i for i in range(len(SPECIALS), vocab)})
    special = lambda i, c: {"id": i, "content": c, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
    cls, sep = {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [special(i, s) for i, s in enumerate(SPECIALS)],
            "normalizer": None, "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": {"type": "TemplateProcessing",
                               "single": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep],
                               "pair": [cls, {"Sequence": {"id": "A", "type_id": 0}}, sep,
                                        {"Sequence": {"id": "B", "type_id": 1}}, sep],
                               "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                                  "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "decoder": None,
            "model": {"type": "WordLevel", "vocab": words, "unk_token": "[UNK]"}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("sentences")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    shape = TINY if args.tiny else SHAPE
    started = time.time()
    if args.tiny:
        # The standard library alone, as CI has it (tiny_weights.py).
        from tiny_weights import write_bert
        params = write_bert(args.out, shape)
    else:
        import torch
        from transformers import BertConfig, BertModel
        config = BertConfig(**shape, type_vocab_size=2, hidden_act="gelu", layer_norm_eps=1e-12)
        torch.manual_seed(0)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        with torch.device(device):
            model = BertModel(config, add_pooling_layer=False)
        os.makedirs(args.out, exist_ok=True)
        model.save_pretrained(args.out)
        params = sum(p.numel() for p in model.parameters())
    hidden, vocab = shape["hidden_size"], shape["vocab_size"]
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(vocab), f)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "cls_token": "[CLS]",
                   "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]",
                   "model_max_length": 512}, f)
    with open(os.path.join(args.out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}], f)
    with open(os.path.join(args.out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 512, "do_lower_case": False}, f)
    os.makedirs(os.path.join(args.out, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(args.out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": hidden, "pooling_mode_cls_token": True,
                   "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f)
    r = random.Random(11)
    with open(args.sentences, "w") as f:
        for i in range(args.n):
            words = " ".join(f"w{r.randrange(len(SPECIALS), vocab)}"
                             for _ in range(r.randrange(8, 41)))
            f.write(json.dumps({"id": f"s{i}", "text": words}) + "\n")
    print(json.dumps({"model": "bge-large-shape", "folder": args.out, "params": params,
                      "sentences": args.n, "seconds": round(time.time() - started, 1)}), flush=True)


if __name__ == "__main__":
    main()
