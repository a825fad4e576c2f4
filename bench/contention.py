#!/usr/bin/env python3
"""Speed of a benchmark command on a quiet machine and on a shared one (issue 32).

Runs COMMAND (a credence bench that prints one JSON line per measured setting) three
ways, one after another, and compares the rates it prints:

  quiet    alone;
  loaded   beside one busy-looping process per core at nice 10 (a niced build, a
           neighbour's batch job): the command should keep a share of its quiet speed
           in proportion to the CPU the scheduler gives it;
  pair     two copies of COMMAND at the same time (two credence processes on one
           machine): the two together against one quiet copy.

Each JSON line is one setting, named by --key (e.g. in_flight, batch_size); --rates
names the fields compared (tokens/s, sentences/s). Prints a table and, with --json, the
figures as one JSON object. A benchmark, not a test: nothing here fails on a figure.

  bench/contention.py --key in_flight --rates decode_tok_s,aggregate_tok_s -- \\
      credence bench-llm --model M.gguf bench/llm_prompts.jsonl --in-flight 1,8
"""

import argparse
import json
import os
import subprocess
import sys
import time


def run_once(command, copies=1):
    """Runs `copies` copies of the command at once; returns each one's JSON lines."""
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(copies)
    ]
    outs = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"contention: {' '.join(command)} exited with {p.returncode}")
        outs.append([json.loads(l) for l in out.splitlines() if l.strip().startswith("{")])
    return outs


def busy_loops(n):
    """n processes at nice 10 that spin until killed."""
    code = "import os\nos.nice(10)\nwhile True:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def rates(rows, key, fields):
    """{(setting, field): rate} of one run's rows."""
    out = {}
    for r in rows:
        for f in fields:
            if f in r and r[f] is not None:
                out[(r.get(key), f)] = float(r[f])
    return out


def order(setting):
    """Numbers first, by value (8 before 32 before 128), then names."""
    if isinstance(setting, (int, float)) and not isinstance(setting, bool):
        return (0, float(setting), "")
    return (1, 0.0, str(setting))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--key", required=True, help="the JSON field naming a setting")
    ap.add_argument("--rates", required=True, help="comma-separated JSON rate fields")
    ap.add_argument("--label", default="", help="a name for the table")
    ap.add_argument("--busy", type=int, default=os.cpu_count(),
                    help="busy processes for the loaded run (default: one per core)")
    ap.add_argument("--json", action="store_true", help="also print the figures as JSON")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no command")
    fields = [f for f in a.rates.split(",") if f]

    print(f"== {a.label or command[0]}: quiet", file=sys.stderr)
    quiet = rates(run_once(command)[0], a.key, fields)
    print(f"== loaded: {a.busy} busy processes at nice 10", file=sys.stderr)
    hogs = busy_loops(a.busy)
    try:
        time.sleep(0.5)
        loaded = rates(run_once(command)[0], a.key, fields)
    finally:
        for h in hogs:
            h.kill()
        for h in hogs:
            h.wait()
    print("== pair: two copies at once", file=sys.stderr)
    first, second = (rates(rows, a.key, fields) for rows in run_once(command, copies=2))
    pair = {k: first.get(k, 0.0) + second.get(k, 0.0) for k in quiet}

    print(f"{a.label:<10} {a.key:>10} {'rate':<16} {'quiet':>9} {'loaded':>9} {'share':>6} "
          f"{'pair sum':>9} {'share':>6}")
    figures = []
    for (setting, field), q in sorted(quiet.items(), key=lambda kv: (order(kv[0][0]), kv[0][1])):
        l, p = loaded.get((setting, field), 0.0), pair.get((setting, field), 0.0)
        print(f"{a.label:<10} {str(setting):>10} {field:<16} {q:>9.1f} {l:>9.1f} {l / q:>6.2f} "
              f"{p:>9.1f} {p / q:>6.2f}")
        figures.append({"setting": setting, "rate": field, "quiet": q, "loaded": l,
                        "loaded_share": l / q, "pair": p, "pair_share": p / q})
    if a.json:
        print(json.dumps({"label": a.label, "key": a.key, "busy": a.busy, "figures": figures}))


if __name__ == "__main__":
    main()
