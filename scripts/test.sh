#!/usr/bin/env bash
# The test suite, from a fresh machine. With no argument, everything (what CI
# runs: .ci/run); with targets, just those, in the order given:
#
#   scripts/test.sh              set-up, then host, lint, then vm beside aarch64
#   scripts/test.sh host         Rust tests, the criterion benches once each, pytest (no VM)
#   scripts/test.sh lint         cargo fmt --check, clippy, stubtest, mypy --strict, docs/benchmarks.md current
#   scripts/test.sh vm           the real-kernel tests inside a VM (dma-buf heaps, udmabuf, vgem, vivid)
#   scripts/test.sh aarch64      the aarch64 wheel and Rust core under qemu
#   scripts/test.sh host lint    several at once
#
# Every target first runs scripts/setup.sh (idempotent: seconds when nothing
# changed). NPU_ZC_SKIP_VM=1 / NPU_ZC_SKIP_AARCH64=1 leave those steps out of
# the full run.
set -uo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
VENV=${VENV:-$REPO/.venv}
PY=$VENV/bin/python
passed=0
failed=0
failures=()

usage() { sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

step() {
    local name=$1
    shift
    printf '\n==> %s\n' "$name"
    local t0=$SECONDS rc=0
    "$@" || rc=$?
    tally "$name" $rc $((SECONDS - t0))
}

tally() {  # name, exit status, seconds
    if [ "$2" -eq 0 ]; then
        passed=$((passed + 1))
        printf '<== %s: ok (%ss)\n' "$1" "$3"
    else
        failed=$((failed + 1))
        failures+=("$1")
        printf '<== %s: FAILED (%ss)\n' "$1" "$3"
    fi
}

host() {
    step "rust tests (host)" cargo test --quiet
    step "criterion benches, each once (host)" cargo test --quiet --benches
    step "pytest (host)" "$PY" -m pytest -q -p no:cacheprovider tests
}

lint() {
    step "lint: rustfmt" cargo fmt --check
    step "lint: clippy" cargo clippy --quiet --all-targets --features python -- -D warnings
    step "lint: stubs (stubtest)" "$PY" -m mypy.stubtest npu_zc._core --allowlist .ci/stubtest-allowlist.txt
    step "lint: types (mypy --strict, pyproject.toml)" "$PY" -m mypy python/npu_zc
    step "lint: bench types (mypy --strict, pyproject.toml)" "$PY" -m mypy benches
    step "lint: docs/benchmarks.md renders benches/results" "$PY" scripts/render_benchmarks.py --check
}

VM_STEP="real-kernel tests (VM: dma-buf heaps, udmabuf)"
vm_test_binary() {  # built on the host (the guest's root is read-only)
    cargo test --lib --no-run --message-format=json 2>/dev/null |
        "$PY" -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["rlib", "cdylib"]:
        print(m["executable"])' | tail -n 1
}
# The files that hold a test marked kernel (by hand, or by tests/conftest.py for a test that uses a real kernel's
# device), collected on the host: the emulated guest then imports only those (importing every test file cost it
# about 100 s).
kernel_test_files() {
    "$PY" -m pytest --collect-only -q -p no:cacheprovider -m kernel tests | sed -n 's/::.*//p' | sort -u
}
vm_tests() {  # [test binary]
    local bin=${1:-$(vm_test_binary)} files
    [ -x "$bin" ] || { echo "could not build the Rust test binary" >&2; return 1; }
    files=$(kernel_test_files | tr '\n' ' ')
    [ -n "$files" ] || { echo "found no test marked kernel" >&2; return 1; }
    scripts/vm-run.sh bash -c "
        set -e
        echo \"--- [\${SECONDS}s in the guest] rust core tests on the real kernel\"
        '$bin' --quiet buffer::
        echo \"--- [\${SECONDS}s] pytest on the real kernel: every test marked kernel (each backend of the buffer API, vgem, vivid)\"
        '$PY' -m pytest -q -p no:cacheprovider --durations=10 -m kernel $files
        echo \"--- [\${SECONDS}s] soak: a camera and a file stream under injected faults, resources sampled (docs/soak.md)\"
        '$PY' scripts/soak.py --seconds 60
        echo \"--- [\${SECONDS}s] done\""
}
vm() { step "$VM_STEP" vm_tests; }

AARCH64_STEP="aarch64 wheel and core under qemu"
# (scripts/test-aarch64.sh builds the wheel it tests with scripts/build-aarch64.sh --wheel.)
aarch64() { step "$AARCH64_STEP" scripts/test-aarch64.sh; }

# The VM emulates one CPU and the aarch64 step is mostly one emulated Python:
# on a small machine they take half the time side by side. The VM's log is
# printed whole when it ends.
vm_beside_aarch64() {
    local log bin t0=$SECONDS rc=0
    log=$(mktemp)
    bin=$(vm_test_binary)
    printf '\n==> %s (beside the aarch64 step: its log follows that step)\n' "$VM_STEP"
    vm_tests "$bin" >"$log" 2>&1 &
    local vm_pid=$!
    trap 'kill "$vm_pid" 2>/dev/null; exit 130' INT TERM
    aarch64
    wait "$vm_pid" || rc=$?
    trap - INT TERM
    printf '\n==> %s (log)\n' "$VM_STEP"
    cat "$log"
    rm -f "$log"
    tally "$VM_STEP" $rc $((SECONDS - t0))
}

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(host lint)
    [ "${NPU_ZC_SKIP_VM:-}" = 1 ] || targets+=(vm)
    [ "${NPU_ZC_SKIP_AARCH64:-}" = 1 ] || targets+=(aarch64)
fi
for target in "${targets[@]}"; do
    case $target in
        host | lint | vm | aarch64) ;;
        -h | --help | help) usage; exit 0 ;;
        *) printf 'scripts/test.sh: unknown target %q\n\n' "$target" >&2; usage >&2; exit 2 ;;
    esac
done

scripts/setup.sh || { echo "set-up failed: nothing was tested" >&2; exit 1; }
together=0
[[ " ${targets[*]} " == *" vm "* && " ${targets[*]} " == *" aarch64 "* ]] && together=1
for target in "${targets[@]}"; do
    case $together,$target in
        1,vm) ;;
        1,aarch64) vm_beside_aarch64 ;;
        *) "$target" ;;
    esac
done

echo
if [ "$failed" -gt 0 ]; then
    printf 'failed steps: %s\n' "${failures[*]}"
fi
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
