#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, Rust tests, stub checks,
# pytest on this host, the real-kernel tests inside a VM (dma-buf heaps and
# udmabuf), and the aarch64 build tested under emulation.
#
#   scripts/test.sh            everything (what CI runs)
#   NPU_ZC_SKIP_VM=1 ...       leave out the VM step (developers' quick loop)
#   NPU_ZC_SKIP_AARCH64=1 ...  leave out the aarch64 step
set -uo pipefail

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
VENV=${VENV:-$REPO/.venv}
PY=$VENV/bin/python
passed=0
failed=0
failures=()

step() {
    local name=$1
    shift
    printf '\n==> %s\n' "$name"
    local t0=$SECONDS
    if "$@"; then
        passed=$((passed + 1))
        printf '<== %s: ok (%ss)\n' "$name" $((SECONDS - t0))
    else
        failed=$((failed + 1))
        failures+=("$name")
        printf '<== %s: FAILED (%ss)\n' "$name" $((SECONDS - t0))
    fi
}

scripts/setup.sh || { echo "set-up failed: nothing was tested" >&2; exit 1; }

step "rust unit tests (host)" cargo test --quiet
step "lint: clippy, stubs (stubtest), types (mypy)" bash -c "
    cargo clippy --quiet --all-targets -- -D warnings &&
    '$PY' -m mypy.stubtest npu_zc._core --allowlist .ci/stubtest-allowlist.txt &&
    '$PY' -m mypy python/npu_zc"
step "pytest (host)" "$PY" -m pytest -q -p no:cacheprovider tests

vm_tests() {
    # Build on the host (the guest's root is read-only), run in the guest.
    local bin
    bin=$(cargo test --lib --no-run --message-format=json 2>/dev/null |
        "$PY" -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["rlib", "cdylib"]:
        print(m["executable"])' | tail -n 1)
    [ -x "$bin" ] || { echo "could not build the Rust test binary" >&2; return 1; }
    scripts/vm-run.sh bash -c "
        set -e
        echo '--- rust core tests on the real kernel'
        '$bin' --quiet buffer::
        echo '--- pytest on the real kernel: every backend of the buffer API'
        '$PY' -m pytest -q -p no:cacheprovider tests/test_buffers.py tests/test_pool.py tests/test_hardening.py
        echo '--- pytest on the real kernel: everything marked kernel'
        '$PY' -m pytest -q -p no:cacheprovider -m kernel tests
        echo '--- soak: a camera and a file stream under injected faults, resources sampled (docs/soak.md)'
        '$PY' scripts/soak.py --seconds 60"
}
if [ "${NPU_ZC_SKIP_VM:-}" != 1 ]; then
    step "real-kernel tests (VM: dma-buf heaps, udmabuf)" vm_tests
fi

if [ "${NPU_ZC_SKIP_AARCH64:-}" != 1 ] && [ -x scripts/test-aarch64.sh ]; then
    step "aarch64 wheel and core under qemu" bash -c "scripts/build-aarch64.sh && scripts/test-aarch64.sh"
fi

echo
if [ "$failed" -gt 0 ]; then
    printf 'failed steps: %s\n' "${failures[*]}"
fi
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
