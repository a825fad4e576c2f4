# Shared set-up of the spaCy comparison scripts (sourced, not run).
# A throwaway venv with real spaCy 3.8 (bench/.venv-spacy, gitignored) and a credence binary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED_DATA="${CREDENCE_SHARED_DATA:-$ROOT/../shared/data}"
MODEL="${CREDENCE_MODELS_DIR:-$ROOT/models}/en_core_web_sm"
VENV="$ROOT/bench/.venv-spacy"
WORK="$ROOT/bench/.work"
mkdir -p "$WORK"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import spacy" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q 'spacy==3.8.*'
fi
# spaCy loads the same pipeline folder credence reads (files checked by sha256 at load).
"$VENV/bin/python" -c "import spacy; print('spaCy', spacy.__version__)"
if [ -z "${CREDENCE_BIN:-}" ]; then
    # The dev profile optimises the worker crate (the parser) like a release build.
    (cd "$ROOT" && cargo build -q -p credence)
    CREDENCE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/credence"
fi
