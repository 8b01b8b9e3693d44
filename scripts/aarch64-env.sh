# shellcheck shell=bash
# Cross-build npu_zc for 64-bit Arm (aarch64-unknown-linux-gnu) and run the
# results here under qemu-aarch64. Source it (bash), then use cargo as usual:
#
#   source scripts/aarch64-env.sh
#   cargo test --target aarch64-unknown-linux-gnu --lib            # unit tests, run under qemu-aarch64
#   cargo run  --target aarch64-unknown-linux-gnu --example edge_checksum
#
# The first time on a fresh machine it installs what is missing (about 30 s):
#   * Debian's rustc-web/cargo-web (>= 1.83; rustup's toolchains here carry
#     only the x86_64 std, and nothing can download another one),
#   * the aarch64 std of exactly that rustc, from Debian's libstd-rust-web-dev:arm64,
#   * gcc-aarch64-linux-gnu + libc6-dev-arm64-cross (linker and the libc that
#     the test binaries are linked against and run with), qemu-user.
# After that, sourcing it only checks and exports (well under a second).
#
# Only this shell is changed: Debian's rustc/cargo come first on PATH and
# CARGO_TARGET_DIR is <repo>/target/aarch64-cross, so host builds with
# rustup's toolchain are never touched. Open a new shell to leave.
# Caches: <repo>/.cache/aarch64, or $NPU_ZC_AARCH64_CACHE (point other work
# trees at one cache to share it). The linker exported here is gcc (glibc
# 2.36 symbols): fine for tests; wheels and binaries for boards are linked by
# zig for glibc 2.28 (scripts/build-aarch64.sh).
# qemu's CPU model: $NPU_ZC_QEMU_CPU (default "max": every optional Arm
# feature, so runtime-detected SIMD paths run; "cortex-a72" is the Versal AI
# Edge's core, for the paths such a board takes).

if [ -z "${BASH_VERSION:-}" ]; then
    echo "aarch64-env.sh: source this file from bash" >&2
    return 1 2>/dev/null || exit 1
fi

NPU_ZC_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
NPU_ZC_AARCH64_CACHE=${NPU_ZC_AARCH64_CACHE:-$NPU_ZC_REPO/.cache/aarch64}
export NPU_ZC_REPO NPU_ZC_AARCH64_CACHE

# apt-get for arm64 packages with a private package index under the cache: it
# lets us download arm64 .debs without `dpkg --add-architecture arm64`.
npu_zc_apt_arm64() {
    local dir=$NPU_ZC_AARCH64_CACHE/apt
    mkdir -p "$dir/lists/partial" "$dir/archives/partial"
    [ -e "$dir/status" ] || : >"$dir/status"
    apt-get -q \
        -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
        -o Dir::State::Lists="$dir/lists" -o Dir::State::Status="$dir/status" \
        -o Dir::Cache="$dir" -o Dir::Cache::archives="$dir/archives" \
        -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false \
        -o Acquire::Languages=none "$@"
}

# Setup runs as its own bash process (the sourced part below calls
# `bash this-file --setup`): strict mode works there even when the caller
# wrote `source ... && cargo ...`, a context in which bash ignores `set -e`,
# and a failure cannot kill or change the caller's shell.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    if [ "${1:-}" != --setup ]; then
        echo "aarch64-env.sh: source it, do not run it:  source ${BASH_SOURCE[0]}" >&2
        exit 1
    fi
    set -euo pipefail
    log() { echo "aarch64-env: $*" >&2; }
    die() { log "error: $*"; exit 1; }
    as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    # One setup at a time per cache (several shells may source this at once).
    mkdir -p "$NPU_ZC_AARCH64_CACHE"
    exec 9>"$NPU_ZC_AARCH64_CACHE/.setup.lock"
    flock 9

    # 1. Host packages.
    pkgs=(rustc-web cargo-web qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross file)
    missing=()
    for p in "${pkgs[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]} (Debian)"
        as_root apt-get -q update >/dev/null || die "apt-get update failed"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends \
            -o DPkg::Lock::Timeout=600 "${missing[@]}" >/dev/null \
            || die "apt-get install ${missing[*]} failed"
    fi
    # (Not `| grep -q`: with pipefail, grep's early exit can fail the pipe.)
    [[ "$(/usr/bin/rustc -vV)" == *"host: x86_64-unknown-linux-gnu"* ]] \
        || die "this script cross-builds from x86_64 Linux; /usr/bin/rustc is for another host"

    # 2. The aarch64 std of exactly this rustc (rustc refuses a std built by
    # another version). Why not `dpkg --add-architecture arm64 && apt-get
    # install libstd-rust-web-dev:arm64`: that drags in libc6:arm64 under
    # /lib/aarch64-linux-gnu and lists it in /etc/ld.so.cache, where the
    # loader of the cross sysroot that qemu runs (-L /usr/aarch64-linux-gnu)
    # finds it: a loader and a libc of different builds, which hang at 100%
    # CPU. It also changes apt for everyone on the machine. Extracting the one
    # .deb into our own sysroot changes nothing outside the cache.
    ver=$(dpkg-query -W -f='${Version}' rustc-web)
    sysroot=$NPU_ZC_AARCH64_CACHE/rust-sysroot/$ver
    if [ ! -d "$sysroot/lib/rustlib/aarch64-unknown-linux-gnu/lib" ]; then
        log "fetching the aarch64 std for rustc-web $ver (libstd-rust-web-dev:arm64, ~35 MB)"
        tmp=$(mktemp -d "$NPU_ZC_AARCH64_CACHE/tmp.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        compgen -G "$NPU_ZC_AARCH64_CACHE/apt/lists/*_Packages" >/dev/null \
            || npu_zc_apt_arm64 update >/dev/null || die "apt-get update of the arm64 index failed"
        # A stale index may lack this version (security updates move it): refresh once.
        (cd "$tmp" && npu_zc_apt_arm64 download "libstd-rust-web-dev=$ver" >/dev/null 2>&1) \
            || { npu_zc_apt_arm64 update >/dev/null && (cd "$tmp" && npu_zc_apt_arm64 download "libstd-rust-web-dev=$ver" >/dev/null); } \
            || die "cannot download libstd-rust-web-dev:arm64 $ver; it must match rustc-web $ver exactly (try: apt-get update && apt-get install rustc-web cargo-web)"
        dpkg-deb -x "$tmp"/libstd-rust-web-dev_*_arm64.deb "$tmp/x"
        mkdir -p "$tmp/sysroot/lib/rustlib"
        mv "$tmp/x/usr/lib/rustlib/aarch64-unknown-linux-gnu" "$tmp/sysroot/lib/rustlib/"
        # The host's std stays Debian's own: build scripts and proc macros need it.
        for d in /usr/lib/rustlib/*; do
            [ -e "$tmp/sysroot/lib/rustlib/${d##*/}" ] || ln -s "$d" "$tmp/sysroot/lib/rustlib/"
        done
        rm -rf "$NPU_ZC_AARCH64_CACHE/rust-sysroot"   # older versions' sysroots
        mkdir -p "$NPU_ZC_AARCH64_CACHE/rust-sysroot"
        mv "$tmp/sysroot" "$sysroot"
    fi

    # 3. rustc/rustdoc wrappers that name that sysroot. A wrapper, not
    # RUSTFLAGS=--sysroot: cargo ignores target rustflags whenever RUSTFLAGS is
    # set (a user's `-C target-cpu=native`, say), and then std "vanishes".
    mkdir -p "$NPU_ZC_AARCH64_CACHE/bin"
    for tool in rustc rustdoc; do
        body=$(printf '#!/bin/sh\n# Debian %s with the sysroot that holds the aarch64 std (scripts/aarch64-env.sh).\nexec /usr/bin/%s --sysroot "%s" "$@"' \
            "$tool" "$tool" "$sysroot")
        # Rewritten only when it changes, so cargo's cached rustc info stays valid.
        if [ "$(cat "$NPU_ZC_AARCH64_CACHE/bin/$tool" 2>/dev/null)" != "$body" ]; then
            printf '%s\n' "$body" >"$NPU_ZC_AARCH64_CACHE/bin/$tool.new"
            chmod +x "$NPU_ZC_AARCH64_CACHE/bin/$tool.new"
            mv "$NPU_ZC_AARCH64_CACHE/bin/$tool.new" "$NPU_ZC_AARCH64_CACHE/bin/$tool"
        fi
    done
    ln -sfn /usr/bin/cargo "$NPU_ZC_AARCH64_CACHE/bin/cargo"
    exit 0
fi

if bash "${BASH_SOURCE[0]}" --setup; then
    case ":$PATH:" in
        *":$NPU_ZC_AARCH64_CACHE/bin:"*) ;;
        *) PATH=$NPU_ZC_AARCH64_CACHE/bin:$PATH ;;
    esac
    export PATH
    export RUSTC=$NPU_ZC_AARCH64_CACHE/bin/rustc
    export RUSTDOC=$NPU_ZC_AARCH64_CACHE/bin/rustdoc
    export CARGO_TARGET_DIR=$NPU_ZC_REPO/target/aarch64-cross
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -cpu ${NPU_ZC_QEMU_CPU:-max} -L /usr/aarch64-linux-gnu"
    # For crates that compile C (the cc crate).
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
else
    echo "aarch64-env: setup failed; nothing was exported" >&2
    return 1
fi
