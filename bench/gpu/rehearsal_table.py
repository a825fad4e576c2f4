"""The rehearsal's table (Markdown) from its results.jsonl: per model and number in
flight, credence's aggregate tokens/s (batched attention, and the per-sequence attention
where measured), transformers' on the same weights, their ratio and credence's scaling
over its single stream; the memory steps (GPU memory held against the weights' bytes,
the induced out-of-memory); the encoder's sentences/s beside sentence-transformers and
its CUDA vectors' cosine to the CPU's; whether decode steps captured as CUDA graphs
give the eager steps' token ids; then the paper sweep's projected generation time on
this GPU.

The projection: per local model, 8,800 decompositions plus 17,600 self-repair calls (the
self_repair and all modes; an upper bound, since the early-exit guard skips examples
that verify), ~200 generated tokens each, at the best measured aggregate speed.
"""
import json
import sys

GENERATIONS = 8_800 + 2 * 8_800
TOKENS_EACH = 200


def encoder_table(rows):
    """sentences/s per implementation and batch size, and the CUDA-CPU cosine."""
    enc = [r for r in rows if "sentences_per_s" in r]
    if not enc:
        return []
    label = lambda r: (r["impl"] + (f" {r['precision']}" if r.get("precision", "f32") != "f32" else "")
                       + (" per-sequence" if r.get("attention") == "per-sequence" else "")
                       + (" (candle's dense layers)" if "candle-dense" in r.get("step", "") else ""))
    st = {r["batch_size"]: r["sentences_per_s"] for r in enc if r["impl"] == "sentence-transformers"}
    out = ["| encoder | batch | sentences/s | / sentence-transformers |", "|---|---|---|---|"]
    for r in enc:
        ref = st.get(r["batch_size"])
        ratio = f"{r['sentences_per_s'] / ref:.2f}x" if ref else "-"
        out.append(f"| {label(r)} | {r['batch_size']} | {r['sentences_per_s']:.0f} | {ratio} |")
    for r in rows:
        if "min_cosine_device_cpu" in r:
            out.append(f"\n- encoder: the lowest cosine of {r['vectors']} device vectors to "
                       f"the CPU's: {r['min_cosine_device_cpu']}")
    return out + [""]


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    weights = {}
    for r in rows:
        if r.get("step", "").startswith("make ") and "model" in r:
            weights[r["model"]] = r.get("bytes") or 2 * r.get("params", 0)
    by = {}
    for r in rows:
        if "aggregate_tok_s" not in r or r.get("step", "").startswith(("out-of-memory", "memory")):
            continue
        impl = r["impl"]
        if r.get("step", "").startswith("credence-per-sequence"):
            impl = "credence per-sequence"
        model = r["model"].removesuffix(".gguf")
        if r.get("step", "").startswith("credence-kv-bf16"):
            model += " (bf16 keys and values)"
        if r.get("step", "").startswith("credence-graphs"):
            model += " (CUDA graphs)"
        by.setdefault(model, {}).setdefault(r["in_flight"], {})[impl] = r
    out = ["| model | in flight | credence tok/s | per-sequence tok/s | transformers tok/s "
           "| credence / transformers | credence / its single stream |",
           "|---|---|---|---|---|---|---|"]
    best = {}
    for model, sizes in sorted(by.items()):
        single = sizes.get(1, {}).get("credence", {}).get("aggregate_tok_s")
        for n, impls in sorted(sizes.items()):
            c = impls.get("credence", {}).get("aggregate_tok_s")
            p = impls.get("credence per-sequence", {}).get("aggregate_tok_s")
            t = impls.get("transformers", {}).get("aggregate_tok_s")
            f = lambda x: f"{x:.1f}" if x else "-"
            ratio = f"{c / t:.2f}x" if c and t else "-"
            scale = f"{c / single:.1f}x" if c and single else "-"
            out.append(f"| {model} | {n} | {f(c)} | {f(p)} | {f(t)} | {ratio} | {scale} |")
            if c:
                best[model] = max(best.get(model, 0), c)
        extra = [r for s in sizes.values() for r in s.values() if r.get("decode_tok_s")]
        for r in extra:
            if r["impl"] == "credence":
                read = ""
                if weights.get(model):
                    read = f" (reads {weights[model] * r['decode_tok_s'] / 1e12:.2f} TB/s of weights)"
                out.append(f"|  | prefill {r['prefill_tok_s']:.0f} tok/s, single-stream decode "
                           f"{r['decode_tok_s']:.1f} tok/s{read} | | | | | |")
    out.append("")
    out.extend(encoder_table(rows))
    for r in rows:
        if "held_mib" in r:
            out.append(f"- {r['step']}: the weights {r['weights_mib']:,} MiB; a short run "
                       f"held {r['held_mib']:,} MiB of GPU memory at its peak "
                       f"({r['held_mib'] / max(r['weights_mib'], 1):.2f}x)")
        elif "process_exit" in r:
            out.append(f"- {r['step']}: the process exited with status {r['process_exit']}")
        elif "graph_ids_equal_eager" in r:
            same = "equal" if r["graph_ids_equal_eager"] else "DIFFERENT"
            out.append(f"- {r['step']}: {r['generations']} generations' token ids with CUDA "
                       f"graphs and without: {same}")
    for r in rows:
        if "error" in r:
            out.append(f"- {r.get('step', '')}: prompt {r['prompt']} failed alone: {r['error']}")
        elif r.get("step", "").startswith("out-of-memory") and "prompts" in r:
            out.append(f"- {r['step']}: {r['prompts']} other prompts finished "
                       f"({r['generated_tokens']} tokens)")
    tokens = GENERATIONS * TOKENS_EACH
    for model, speed in sorted(best.items()):
        out.append(f"- {model}: {GENERATIONS:,} generations x {TOKENS_EACH} tokens = "
                   f"{tokens / 1e6:.1f} M tokens at {speed:.0f} tok/s: "
                   f"{tokens / speed / 3600:.1f} h on this GPU")
    print("\n".join(out))


if __name__ == "__main__":
    main()
