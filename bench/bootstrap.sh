#!/usr/bin/env bash
# The bootstrap against NumPy (issue 14): runs the demo sweep with the embedded engine,
# recomputes every stored interval and p-value with NumPy on the same index matrices
# (and on NumPy's own generator), then times the 64-configuration workload in NumPy
# (gather and count-matrix forms) and in credence (`credence stats bench`), in one run.
# Usage: bench/bootstrap.sh   (NumPy goes in a throwaway venv under /tmp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-/tmp/credence-numpy-venv}
target=${CARGO_TARGET_DIR:-$root/target}
[ -x "$venv/bin/python" ] || { python3 -m venv "$venv" && "$venv/bin/pip" install -q numpy; }
(cd "$root" && cargo build -q --bin credence)
credence="$target/debug/credence"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$credence" run "$root/examples/demo.toml" --db "$work/demo.db" --quiet > /dev/null
echo "== agreement (demo sweep, same index matrices; NumPy's own generator for comparison)"
"$venv/bin/python" "$root/bench/bootstrap_numpy.py" check --db "$work/demo.db" --credence "$credence"
echo "== timing: NumPy"
"$venv/bin/python" "$root/bench/bootstrap_numpy.py" bench --repeats 3
echo "== timing: credence (threads 1 and all)"
"$credence" stats bench --repeats 5
