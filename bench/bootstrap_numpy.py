"""NumPy check of credence's paired bootstrap (issue 14), and its timing reference.

check:  reads the per-example metrics, `aggregates` and `comparisons` of a finished run
        from its SQLite file, recomputes every interval and p-value with NumPy on the very
        same index matrices (exported by `credence stats indices`), and again with NumPy's
        own generator (agreement in distribution only). Exit status 1 when an endpoint
        differs by more than 0.002 or a p-value by more than 0.01 on the same indices.
bench:  times the issue's workload (4 datasets x 16 configurations, n = 1,000,
        B = 10,000: 64 percentile intervals and 48 paired tests) in the obvious gather
        form and in the count-matrix form.
"""

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VALUES_SQL = """
SELECT p.example_id, v.metric, v.value
FROM predictions p
JOIN jobs j ON j.job_key = p.job_key
JOIN examples e ON e.dataset_hash = j.dataset_hash AND e.example_id = p.example_id
LEFT JOIN metric_values v ON v.job_key = p.job_key AND v.example_id = p.example_id
WHERE p.run_id = ? AND p.model = ? AND p.dataset = ? AND p.mode = ?
ORDER BY e.position, v.metric
"""


def config_values(db, run, model, dataset, mode):
    ids, values = [], {}
    for ex, metric, value in db.execute(VALUES_SQL, (run, model, dataset, mode)):
        if not ids or ids[-1] != ex:
            ids.append(ex)
        if metric is not None:
            values.setdefault(metric, {})[ex] = value
    return ids, values


def pct(x):
    # NumPy's default linear interpolation, the same rule as credence's.
    return np.percentile(x, [2.5, 97.5], axis=-1)


def two_sided(d):
    b = d.shape[-1]
    return np.minimum(1.0, 2.0 * np.minimum((d <= 0).sum(-1), (d >= 0).sum(-1)) / b)


class Indices:
    def __init__(self, credence, seed, resamples, tmp):
        self.credence, self.seed, self.b, self.tmp, self.cache = credence, seed, resamples, tmp, {}

    def get(self, dataset, n):
        key = (dataset, n)
        if key not in self.cache:
            out = Path(self.tmp) / f"{dataset}-{n}.npy"
            subprocess.run([self.credence, "stats", "indices", "--dataset", dataset, "--n", str(n),
                            "--resamples", str(self.b), "--seed", str(self.seed), "--out", str(out)],
                           check=True)
            self.cache[key] = np.load(out).astype(np.int64)
        return self.cache[key]


def vectors(ids, values, metric):
    got = values.get(metric, {})
    keep = [i for i in ids if i in got]
    return keep, np.array([got[i] for i in keep])


def check(args):
    db = sqlite3.connect(args.db)
    spec = json.loads(db.execute("SELECT spec_json FROM runs WHERE run_id = ?", (args.run,)).fetchone()[0])
    seed, b = spec["bootstrap"]["seed"], spec["bootstrap"]["resamples"]
    own = np.random.default_rng(seed)
    worst = {"ci_same": 0.0, "p_same": 0.0, "ci_own": 0.0, "p_own": 0.0}
    counts = {"aggregates": 0, "comparisons": 0}
    with tempfile.TemporaryDirectory() as tmp:
        idx = Indices(args.credence, seed, b, tmp)
        own_idx = {}

        def own_for(n):
            if n not in own_idx:
                own_idx[n] = own.integers(0, n, size=(b, n))
            return own_idx[n]

        cache = {}

        def load(model, dataset, mode):
            k = (model, dataset, mode)
            if k not in cache:
                cache[k] = config_values(db, args.run, model, dataset, mode)
            return cache[k]

        for model, dataset, mode, metric, n, mean, lo, hi in db.execute(
                "SELECT model, dataset, mode, metric, n, mean, ci_low, ci_high FROM aggregates "
                "WHERE run_id = ? AND method = 'percentile'", (args.run,)).fetchall():
            ids, values = load(model, dataset, mode)
            _, x = vectors(ids, values, metric)
            assert len(x) == n, (model, dataset, mode, metric)
            assert abs(x.mean() - mean) < 1e-12
            same = pct(x[idx.get(dataset, n)].mean(axis=1))
            theirs = pct(x[own_for(n)].mean(axis=1))
            worst["ci_same"] = max(worst["ci_same"], abs(same[0] - lo), abs(same[1] - hi))
            worst["ci_own"] = max(worst["ci_own"], abs(theirs[0] - lo), abs(theirs[1] - hi))
            counts["aggregates"] += 1
        for (metric, dataset, am, amode, bm, bmode, n, delta, lo, hi, p) in db.execute(
                "SELECT metric, dataset, a_model, a_mode, b_model, b_mode, n, delta, ci_low, ci_high, "
                "p_value FROM comparisons WHERE run_id = ? AND method = 'percentile'", (args.run,)).fetchall():
            a_ids, a_vals = load(am, dataset, amode)
            _, b_vals = load(bm, dataset, bmode)
            ga, gb = a_vals.get(metric, {}), b_vals.get(metric, {})
            keep = [i for i in a_ids if i in ga and i in gb]
            xa, xb = np.array([ga[i] for i in keep]), np.array([gb[i] for i in keep])
            assert len(keep) == n
            assert abs((xa.mean() - xb.mean()) - delta) < 1e-12
            for name, rows in (("same", idx.get(dataset, n)), ("own", own_for(n))):
                d = xa[rows].mean(axis=1) - xb[rows].mean(axis=1)
                ci = pct(d)
                worst[f"ci_{name}"] = max(worst[f"ci_{name}"], abs(ci[0] - lo), abs(ci[1] - hi))
                worst[f"p_{name}"] = max(worst[f"p_{name}"], abs(two_sided(d) - p))
            counts["comparisons"] += 1
    # NumPy comparisons give numpy.bool_, which json cannot write.
    ok = bool(worst["ci_same"] <= 0.002 and worst["p_same"] <= 0.01)
    print(json.dumps({"rows": counts, "max_abs_diff": worst, "agree": ok}))
    return 0 if ok else 1


def bench(args):
    datasets, configs, modes, n, b = 4, 16, 4, 1000, 10_000
    rng = np.random.default_rng(2026)
    data = [rng.random((n, configs)) for _ in range(datasets)]
    # The same per-dataset index rows for both forms (drawn inside the timing).
    times = {}

    def finish(means):
        out = [pct(means.T)]
        for c in range(configs):
            base = c - c % modes
            if c != base:
                d = means[:, c] - means[:, base]
                out.append((pct(d), two_sided(d)))
        return out

    for form in ("gather", "count_matrix"):
        best = float("inf")
        for _ in range(args.repeats if form == "count_matrix" else 1):
            g = np.random.default_rng(42)
            t = time.perf_counter()
            for x in data:
                idx = g.integers(0, n, size=(b, n))
                if form == "gather":
                    means = np.stack([x[:, c][idx].mean(axis=1) for c in range(configs)], axis=1)
                else:
                    flat = (idx + (np.arange(b) * n)[:, None]).ravel()
                    counts = np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)
                    means = counts @ x / n
                finish(means)
            best = min(best, time.perf_counter() - t)
        times[form] = best
    # The count-matrix product alone, given the counts (the fastest NumPy can be).
    g = np.random.default_rng(42)
    counts = []
    for x in data:
        idx = g.integers(0, n, size=(b, n))
        flat = (idx + (np.arange(b) * n)[:, None]).ravel()
        counts.append(np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64))
    best = float("inf")
    for _ in range(args.repeats):
        t = time.perf_counter()
        for c, x in zip(counts, data):
            finish(c @ x / n)
        best = min(best, time.perf_counter() - t)
    times["count_matrix_given_counts"] = best
    print(json.dumps({"numpy": np.__version__, "seconds": times}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--db", required=True)
    c.add_argument("--run", default="demo")
    c.add_argument("--credence", required=True, help="the credence binary (exports index matrices)")
    bn = sub.add_parser("bench")
    bn.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    return check(args) if args.cmd == "check" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
