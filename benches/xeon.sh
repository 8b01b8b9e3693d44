#!/usr/bin/env bash
# Every measurement for the Xeon (Intel Xeon, Sapphire/Emerald Rapids class, 16 cores, AMX; not an NPU) in one go.
#
# Run from the repository root on the Xeon, with the wheels of benches/xeon-wheels.sh in .whl/ (see
# ../shared/notes/device.md): installs them into /tmp/site (no registry there), then runs
#   1. bench_throughput.py   throughput mode vs benchmark_app's limit vs AsyncInferQueue + cv2/numpy (issue 14.1)
#   2. check_bf16.py         runtime graph from the input to the first convolution; bf16 vs f32 top-1 (issue 14.3)
#   3. bench_cpu_time.py     CPU time per frame by thread, with and without each CPU plugin setting (issue 14.4)
#   4. bench_pipeline.py --runs 300   the single-stream table of the README
#   5. npu-zc run --hint throughput, then one frame at a time, then --requests 2: the CLI, for the README
# and writes each step's output, its JSON and a summary to $OUT (default /tmp/xeon-out). A failing step is logged
# and the next one still runs. The whole run keeps within XEON_BUDGET seconds (default 570: a device command may
# run 600 s): each step gets at most what is left.
#
# Environment: PY (python3), SITE (/tmp/site), WHEELS (.whl), OUT, QUICK=1 (smoke run: every bench in its quick
# mode), TP_SECONDS (seconds per bench_throughput variant, default 10), CPU_FRAMES (bench_cpu_time, default 400).
set -u
set -x
cd "$(dirname "$0")/.."
PY=${PY:-python3}
SITE=${SITE:-/tmp/site}
WHEELS=${WHEELS:-.whl}
OUT=${OUT:-/tmp/xeon-out}
QUICK=${QUICK:-0}
BUDGET=${XEON_BUDGET:-570}
TP_SECONDS=${TP_SECONDS:-10}
CPU_FRAMES=${CPU_FRAMES:-400}
mkdir -p "$OUT"
export PY SITE WHEELS OUT QUICK
exec > >(tee -a "$OUT/xeon.log") 2>&1
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
STARTED=$SECONDS
SUMMARY=()

# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in $OUT/NAME.txt (and the log), at most LIMIT_S seconds
# or what is left of the budget, whichever is less; records the exit status and the time it took.
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - (SECONDS - STARTED) - 10))
    if ((left < 15)); then
        SUMMARY+=("$(printf '%-18s %-10s %s' "$name" "SKIPPED" "no time left in the budget")")
        return
    fi
    ((limit > left)) && limit=$left
    echo "=== $name (at most ${limit}s): $*"
    local begun=$SECONDS
    if declare -F "$1" > /dev/null; then  # a function of this script: timeout runs it in a bash of its own
        export -f "$1"
        set -- bash -c "$1"
    fi
    timeout --kill-after=5 "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"
    local rc=${PIPESTATUS[0]}
    local verdict=ok
    ((rc == 124 || rc == 137)) && verdict="TIMEOUT"
    ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED($rc)"
    SUMMARY+=("$(printf '%-18s %-10s %4ss  %s' "$name" "$verdict" "$((SECONDS - begun))" "$OUT/$name.txt")")
}

machine() {
    uname -a
    nproc
    lscpu
    grep -o -w 'avx512f\|avx512_bf16\|avx512_fp16\|amx_bf16\|amx_int8\|amx_tile\|avx_vnni' /proc/cpuinfo | sort | uniq -c
    free -g
    ls /dev/dma_heap /dev/udmabuf 2>&1
    "$PY" --version
    git log -1 --format='commit %H %s' 2>/dev/null || true
    ls -la "$WHEELS"
}

install() {
    rm -rf "$SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$WHEELS"/*.whl || return 1
    # The wheel was built from this checkout; if its Python files differ (built earlier), this checkout's win:
    # the Rust core (_core.abi3.so) is the wheel's either way.
    local differs
    differs=$(diff -rq --exclude='*.so' --exclude=__pycache__ python/npu_zc "$SITE/npu_zc" 2>&1)
    if [ -n "$differs" ]; then
        echo "the wheel's Python files differ from this checkout's; using the checkout's:"
        echo "$differs"
        (cd python && find npu_zc -name '*.py' -o -name '*.pyi' -o -name '*.json' -o -name '*.txt' | while read -r f; do
            mkdir -p "$SITE/$(dirname "$f")" && cp "$f" "$SITE/$f"
        done)
    fi
    "$PY" - <<'EOF'
import openvino as ov, npu_zc
from npu_zc.runtime import core, openvino_version
c = core()
print("npu_zc", npu_zc.__file__, "OpenVINO", openvino_version(), "devices", c.available_devices)
for key in ("FULL_DEVICE_NAME", "INFERENCE_PRECISION_HINT", "OPTIMIZATION_CAPABILITIES", "RANGE_FOR_STREAMS"):
    print(key, c.get_property("CPU", key))
print("CPU properties:", ", ".join(c.get_property("CPU", "SUPPORTED_PROPERTIES")))
EOF
}

cli_throughput() {
    "$PY" -c "
import cv2
from npu_zc.pipeline import full_hd, sample_photo
cv2.imwrite('/tmp/chelsea-1080p.png', full_hd(sample_photo('chelsea')))" || return 1
    local n=3000
    [ "$QUICK" = 1 ] && n=100
    "$PY" -m npu_zc run -i /tmp/chelsea-1080p.png -d CPU -n "$n" --hint throughput || return 1
    "$PY" -m npu_zc run -i /tmp/chelsea-1080p.png -d CPU -n "$((n / 5))" || return 1
    "$PY" -m npu_zc run -i /tmp/chelsea-1080p.png -d CPU -n "$((n / 5))" --requests 2
}

step machine 30 machine
step install 180 install
if [ "$QUICK" = 1 ]; then
    step bench_throughput 120 "$PY" benches/bench_throughput.py --quick --configs 1:auto,2:auto --json "$OUT/bench_throughput.json"
    step check_bf16 120 "$PY" benches/check_bf16.py --json "$OUT/check_bf16.json"
    step bench_cpu_time 120 "$PY" benches/bench_cpu_time.py --quick --json "$OUT/bench_cpu_time.json"
    step bench_pipeline 120 "$PY" benches/bench_pipeline.py --runs 30 --count-frames 5
else
    step bench_throughput 200 "$PY" benches/bench_throughput.py --seconds "$TP_SECONDS" --configs 1:auto,2:auto,4:auto,2:16,2:64 \
        --json "$OUT/bench_throughput.json"
    step check_bf16 90 "$PY" benches/check_bf16.py --json "$OUT/check_bf16.json"
    step bench_cpu_time 180 "$PY" benches/bench_cpu_time.py --frames "$CPU_FRAMES" --json "$OUT/bench_cpu_time.json"
    step bench_pipeline 120 "$PY" benches/bench_pipeline.py --runs 300
fi
step cli_throughput 40 cli_throughput

set +x
{
    echo
    echo "=== summary ($((SECONDS - STARTED)) s of a ${BUDGET} s budget; outputs in $OUT)"
    printf '%s\n' "${SUMMARY[@]}"
    echo
    echo "--- targets"
    grep -h -E '^\s+\[(met|MISSED)\]' "$OUT"/bench_throughput.txt "$OUT"/bench_pipeline.txt "$OUT"/bench_cpu_time.txt 2>/dev/null
    grep -h -E 'no f32 between|f32 on the way|top-1 agreement|at least 0.3' "$OUT"/check_bf16.txt 2>/dev/null
} | tee "$OUT/summary.txt"
