#!/usr/bin/env bash
# Throwaway venv with real llama.cpp (llama-cpp-python, compiled from the PyPI sdist) plus
# numpy and gguf, used to make the LLM reference fixtures (scripts/make_llm_fixtures.py)
# and for the llama.cpp side of the LLM benchmark (bench/llm_llamacpp.py).
#
# Usage:  bench/llamacpp_venv.sh            (build if absent, print llama.cpp's system info)
#         source bench/llamacpp_venv.sh     (same, and leaves $LLAMACPP_PY set)
# Idempotent: an existing venv whose llama_cpp imports at the pinned version is kept.
# Environment:
#   LLAMACPP_VENV             venv folder (default bench/.venv-llamacpp, gitignored)
#   LLAMA_CPP_PYTHON_VERSION  pinned version (default 0.3.16: llama.cpp with gemma3 support,
#                             Gemma 3 270M included)
#   LLAMACPP_CMAKE_ARGS       extra CMake flags appended to the CPU-native defaults
#   LLAMACPP_JOBS             parallel compile jobs (default: nproc)
# The build needs cmake and a C++ compiler (apt-get install -y cmake build-essential).
# It compiles llama.cpp for the CPU it runs on (GGML_NATIVE: every SIMD extension this
# CPU has), so the venv is not portable to another machine.

_llamacpp_main() {
    local root venv version py jobs t0 t1
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="${LLAMACPP_VENV:-$root/bench/.venv-llamacpp}"
    version="${LLAMA_CPP_PYTHON_VERSION:-0.3.16}"
    py="$venv/bin/python"
    jobs="${LLAMACPP_JOBS:-$(nproc)}"

    if [ -x "$py" ] && "$py" - "$version" <<'EOF' 2>/dev/null
import sys, llama_cpp, numpy, gguf
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
    then
        echo "llamacpp_venv: $venv has llama-cpp-python $version (kept)" >&2
    else
        command -v cmake >/dev/null || { echo "llamacpp_venv: cmake missing (apt-get install -y cmake)" >&2; return 1; }
        command -v c++ >/dev/null || { echo "llamacpp_venv: no C++ compiler (apt-get install -y g++)" >&2; return 1; }
        t0=$(date +%s)
        if [ ! -x "$py" ]; then
            echo "llamacpp_venv: creating venv $venv" >&2
            python3 -m venv "$venv" || return 1
        fi
        "$py" -m pip install -q --upgrade pip >&2 || return 1
        echo "llamacpp_venv: pip install numpy gguf" >&2
        "$py" -m pip install -q numpy gguf >&2 || return 1
        # CPU-only build with native SIMD; no examples/tests/server to keep the compile short.
        local cmake_args="-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF ${LLAMACPP_CMAKE_ARGS:-}"
        echo "llamacpp_venv: pip install llama-cpp-python==$version from sdist, CMAKE_ARGS='$cmake_args', $jobs jobs (compiles llama.cpp; several minutes)" >&2
        CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$jobs" FORCE_CMAKE=1 \
            nice -n 10 "$py" -m pip install --no-cache-dir --no-binary llama-cpp-python \
            "llama-cpp-python==$version" >&2 || return 1
        t1=$(date +%s)
        echo "llamacpp_venv: built in $((t1 - t0)) s" >&2
    fi
    "$py" - >&2 <<'EOF' || return 1
import llama_cpp
info = llama_cpp.llama_print_system_info()
info = info.decode() if isinstance(info, bytes) else info
print(f"llamacpp_venv: llama-cpp-python {llama_cpp.__version__}; system info: {info.strip()}")
EOF
    LLAMACPP_PY="$py"
    export LLAMACPP_PY
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    _llamacpp_main
else
    _llamacpp_main
    _llamacpp_rc=$?
    unset -f _llamacpp_main
    return "$_llamacpp_rc"
fi
