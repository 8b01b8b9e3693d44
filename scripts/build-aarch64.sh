#!/usr/bin/env bash
# Build npu_zc for 64-bit Arm boards (aarch64-unknown-linux-gnu) on this x86_64 machine:
#   dist/npu_zc-<version>-cp310-abi3-manylinux_2_28_aarch64.whl
#       the Python package, for CPython >= 3.10 on glibc >= 2.28;
#   target/aarch64-cross/aarch64-unknown-linux-gnu/release/examples/edge_checksum
#       the Rust core alone (no Python): what an integrator starts from.
# Both are linked by zig against glibc 2.28, so they run on the same boards.
#
# Usage: scripts/build-aarch64.sh [--wheel | --example]     (default: both)
# Installs what it needs on a fresh machine (scripts/aarch64-env.sh, plus
# maturin, ziglang and cargo-zigbuild from PyPI in a venv under the cache).
# See docs/aarch64.md.
set -euo pipefail
cd "$(dirname "$0")/.."

want_wheel=1 want_example=1
case "${1:-}" in
    "") ;;
    --wheel) want_example=0 ;;
    --example) want_wheel=0 ;;
    *) echo "usage: $0 [--wheel | --example]" >&2; exit 2 ;;
esac

source scripts/aarch64-env.sh
target=aarch64-unknown-linux-gnu

# Build tools from PyPI, kept apart from the project's own venv.
venv=$NPU_ZC_AARCH64_CACHE/venv
tools=("maturin>=1.7,<2" "ziglang==0.17.*" "cargo-zigbuild==0.24.*")
stamp="$venv/.tools ${tools[*]}"
if [ "$(cat "$venv/.tools" 2>/dev/null)" != "$stamp" ]; then
    echo "build-aarch64: installing ${tools[*]} (PyPI)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${tools[@]}"
    echo "$stamp" >"$venv/.tools"
fi
export PATH=$venv/bin:$PATH

# aarch64 ELF check, plus the newest glibc symbol version it needs.
check_elf() {
    local what
    what=$(file -b "$1")
    [[ $what == *"ARM aarch64"* ]] || { echo "build-aarch64: error: $1 is not aarch64: $what" >&2; exit 1; }
    echo "  $(basename "$1"): ${what%%,*}, ARM aarch64, needs $(aarch64-linux-gnu-objdump -T "$1" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
}

# maturin --zig and cargo-zigbuild put zig in as the linker only where no
# linker is set: drop aarch64-env's gcc (whose glibc 2.36 symbols would fail
# the manylinux_2_28 check).
unset CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER

if [ $want_wheel = 1 ]; then
    echo "build-aarch64: wheel (maturin, release, manylinux_2_28, abi3)" >&2
    rm -f dist/npu_zc-*_aarch64.whl
    # A target dir of its own: cargo sees different settings under maturin and
    # under cargo-zigbuild (libc: ConfigSettingsChanged), so in one dir each
    # build would recompile libc and its dependents after the other.
    CARGO_TARGET_DIR=$CARGO_TARGET_DIR/wheel \
        maturin build --release --target $target --zig --compatibility manylinux_2_28 --out dist
    wheel=$(ls dist/npu_zc-*-manylinux_2_28_aarch64.whl)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 -m zipfile -e "$wheel" "$tmp"
fi

if [ $want_example = 1 ]; then
    echo "build-aarch64: Rust core + example (cargo zigbuild, release, glibc 2.28)" >&2
    # cargo-zigbuild's ".2.28" suffix picks the glibc to link against; the
    # output still lands under the plain target name.
    cargo zigbuild --release --target $target.2.28 --example edge_checksum
    example=$CARGO_TARGET_DIR/$target/release/examples/edge_checksum
fi

echo
echo "aarch64 artefacts:"
if [ $want_wheel = 1 ]; then
    echo "$PWD/$wheel"
    check_elf "$tmp/npu_zc/_core.abi3.so"
fi
if [ $want_example = 1 ]; then
    echo "$example"
    check_elf "$example"
fi
