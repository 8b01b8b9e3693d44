#!/usr/bin/env bash
# The test suite, from a fresh machine. With no argument, everything (what CI
# runs: .ci/run); with targets, just those, in the order given:
#
#   scripts/test.sh              set-up, then host, lint, vm, aarch64
#   scripts/test.sh host         Rust tests and pytest on this machine (no VM)
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

host() {
    step "rust tests (host)" cargo test --quiet
    step "pytest (host)" "$PY" -m pytest -q -p no:cacheprovider tests
}

lint() {
    step "lint: rustfmt" cargo fmt --check
    step "lint: clippy" cargo clippy --quiet --all-targets --features python -- -D warnings
    step "lint: stubs (stubtest)" "$PY" -m mypy.stubtest npu_zc._core --allowlist .ci/stubtest-allowlist.txt
    step "lint: types (mypy --strict, pyproject.toml)" "$PY" -m mypy python/npu_zc
    step "lint: docs/benchmarks.md renders benches/results" "$PY" scripts/render_benchmarks.py --check
}

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
        '$PY' -m pytest -q -p no:cacheprovider tests/buffers
        echo '--- pytest on the real kernel: everything marked kernel'
        '$PY' -m pytest -q -p no:cacheprovider -m kernel tests
        echo '--- soak: a camera and a file stream under injected faults, resources sampled (docs/soak.md)'
        '$PY' scripts/soak.py --seconds 60"
}
vm() { step "real-kernel tests (VM: dma-buf heaps, udmabuf)" vm_tests; }

aarch64() {
    step "aarch64 wheel and core under qemu" bash -c "scripts/build-aarch64.sh && scripts/test-aarch64.sh"
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
for target in "${targets[@]}"; do
    "$target"
done

echo
if [ "$failed" -gt 0 ]; then
    printf 'failed steps: %s\n' "${failures[*]}"
fi
echo "steps: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
