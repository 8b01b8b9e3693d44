#!/usr/bin/env bash
# Run a command inside a small VM whose kernel has DMA-BUF heaps and udmabuf.
#
# Usage: scripts/vm-run.sh [--] COMMAND [ARGS...]
#
# Our build and CI hosts have neither /dev/dma_heap/* nor /dev/udmabuf, so tests
# that allocate real DMA-BUFs boot Debian's 6.12 kernel (CONFIG_DMABUF_HEAPS_SYSTEM=y,
# CONFIG_UDMABUF=y) under QEMU with virtme-ng. The guest sees the host's root
# filesystem read-only, so host-built wheels, venvs and test binaries run unchanged.
# How the tests use it: docs/testing.md.
#
# The guest also loads two real test devices: vivid (virtual camera; /dev/video0 is
# its single-planar capture node, /dev/video4 or so the multi-planar one: find them by
# name in /sys/class/video4linux/*/name) and vgem (virtual DRM device, /dev/dri/card0).
#
# The command runs as root, in the same working directory, with NPU_ZC_IN_VM=1
# (tests then FAIL rather than skip when a heap is missing). It sees only PATH,
# VIRTUAL_ENV, HOME, LANG, LC_ALL, RUST_BACKTRACE, PYTEST_ADDOPTS, every NPU_ZC_*
# variable and the names listed in VM_PASS_ENV; nothing else of the host's
# environment reaches the guest.
#
# The guest's root is read-only apart from throw-away overlays (/tmp, /etc, /var...);
# the repository and /root are read-only. Hence:
#   - write results to $NPU_ZC_VM_OUT (a host folder, default .cache/vm/out);
#   - run pytest with `-p no:cacheprovider`;
#   - hypothesis needs a writable database dir or none: HYPOTHESIS_STORAGE_DIRECTORY
#     defaults to /tmp/hypothesis in the guest (thrown away with the VM).
#
# Environment:
#   VM_TIMEOUT   limit for the whole VM run, in seconds or a `timeout` duration (1500: CI's
#                machines emulate 1.5x slower than ours, and the step runs beside the aarch64 one)
#   VM_MEMORY    guest memory, as for `qemu -m` (1G)
#   VM_CPUS      guest vCPUs (1: the steadiest under software emulation)
#   VM_OUT_DIR   host folder shared read-write as $NPU_ZC_VM_OUT (.cache/vm/out)
#   VM_PASS_ENV  extra variable names to pass into the guest, space-separated
#   VM_VERBOSE=1 show the guest's boot console
#   VM_KERNEL_PACKAGE  a specific Debian kernel package (default: newest linux-image-6.12 amd64)
#   VENV         the venv holding virtme-ng (<repo>/.venv)
#
# Exit status: COMMAND's own status, or
#   2    bad usage
#   120  host set-up failed (packages, virtme-ng, kernel)
#   121  the guest lacks /dev/dma_heap/system or /dev/udmabuf, or cannot enter the working directory
#   124  the VM run hit VM_TIMEOUT
#   125  the VM did not boot, or COMMAND's exit status was lost
#   130  interrupted
set -euo pipefail

readonly EXIT_USAGE=2 EXIT_SETUP=120 EXIT_GUEST_CHECK=121 EXIT_TIMEOUT=124 EXIT_NO_STATUS=125

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
CACHE_DIR=$REPO/.cache/vm
KERNEL_CACHE=$CACHE_DIR/kernel
RUN_DIR=$CACHE_DIR/run
OUT_DIR=${VM_OUT_DIR:-$CACHE_DIR/out}
VENV=${VENV:-$REPO/.venv}
VM_TIMEOUT=${VM_TIMEOUT:-1500}
VM_MEMORY=${VM_MEMORY:-1G}
VM_CPUS=${VM_CPUS:-1}

HOST_PACKAGES=(qemu-system-x86 busybox-static kmod udev file)
# Only these modules are needed to mount the 9p root; the rest of the kernel's
# ~4000 modules would cost about 6 s per boot while virtme scans them.
ROOT_MODULES=(9p 9pnet 9pnet_virtio netfs overlay virtio_mmio)
# Real devices for the tests, kept with every module they depend on and loaded
# in the guest: vivid (the kernel's virtual camera: V4L2 capture, single- and
# multi-planar, mmap and dmabuf io) and vgem (a virtual DRM device: PRIME
# import/export of DMA-BUFs and fences).
DEVICE_MODULES=(vivid vgem)
# vivid makes two instances: /dev/video0 single-planar, the next capture node multi-planar.
VIVID_OPTIONS="n_devs=2 multiplanar=1,2"
KERNEL_META_PACKAGE=linux-image-6.12-amd64

say() { printf 'vm-run: %s\n' "$*" >&2; }
die() {
    local status=$1
    shift
    printf 'vm-run: error: %s\n' "$*" >&2
    exit "$status"
}

# The comment block at the top of this file, without its '#'.
print_help() {
    sed -n '2,/^set -euo pipefail/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

# Root privileges are needed only to install missing Debian packages.
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null; then
        sudo "$@"
    else
        die "$EXIT_SETUP" "installing packages needs root: run '$*' as root, then retry."
    fi
}

apt_get() {
    # Wait for another apt run (another agent, unattended-upgrades) instead of failing.
    # Its chatter goes to stderr, keeping stdout for COMMAND.
    as_root env DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=300 "$@" >&2
}

is_installed() {
    [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]
}

ensure_host_packages() {
    command -v apt-get >/dev/null ||
        die "$EXIT_SETUP" "this script sets up its VM with apt-get and needs a Debian-based host; install ${HOST_PACKAGES[*]} by hand and retry."
    local missing=() package
    for package in "${HOST_PACKAGES[@]}"; do
        is_installed "$package" || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    say "installing ${missing[*]}"
    # Update the package lists only when they do not know a package or are stale.
    if ! apt-cache show "${missing[@]}" >/dev/null 2>&1; then
        apt_get update || die "$EXIT_SETUP" "apt-get update failed; check the apt sources and the network, then retry."
    fi
    if ! apt_get install -y --no-install-recommends "${missing[@]}"; then
        apt_get update || die "$EXIT_SETUP" "apt-get update failed; check the apt sources and the network, then retry."
        apt_get install -y --no-install-recommends "${missing[@]}" ||
            die "$EXIT_SETUP" "could not install ${missing[*]}; see apt's message above."
    fi
}

ensure_vng() {
    VNG=$VENV/bin/vng
    [[ -x $VNG ]] && return 0
    if [[ ! -x $VENV/bin/python ]]; then
        say "creating the venv $VENV"
        python3 -m venv "$VENV" ||
            die "$EXIT_SETUP" "could not create the venv $VENV (is python3-venv installed?); create it or set VENV to an existing one."
    fi
    say "installing virtme-ng into $VENV"
    "$VENV/bin/python" -m pip install -q virtme-ng ||
        die "$EXIT_SETUP" "could not pip install virtme-ng into $VENV; see pip's message above."
    [[ -x $VNG ]] || die "$EXIT_SETUP" "virtme-ng is installed but $VNG is missing."
}

# The newest Debian 6.12 amd64 image, e.g. linux-image-6.12.117+deb12-amd64
# (the meta-package depends on exactly one of them).
newest_kernel_package() {
    {
        apt-cache depends "$KERNEL_META_PACKAGE" 2>/dev/null |
            sed -n 's/^ *Depends: \(linux-image-6\.12\.[0-9]*+deb[0-9]*-amd64\)$/\1/p'
        apt-cache pkgnames linux-image-6.12. 2>/dev/null |
            grep -E '^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64$' | sort -V -r
    } | head -n 1
}

resolve_kernel_package() {
    if [[ -n ${VM_KERNEL_PACKAGE:-} ]]; then
        echo "$VM_KERNEL_PACKAGE"
        return
    fi
    local package
    package=$(newest_kernel_package)
    if [[ -z $package ]]; then
        apt_get update || die "$EXIT_SETUP" "apt-get update failed; check the apt sources and the network, then retry."
        package=$(newest_kernel_package)
    fi
    [[ -n $package ]] ||
        die "$EXIT_SETUP" "apt knows no $KERNEL_META_PACKAGE kernel; add 'deb http://deb.debian.org/debian-security bookworm-security main' to the apt sources, then retry."
    echo "$package"
}

# The file names (without .ko*) of MODULES and of everything they depend on,
# found in the unpacked module tree MODDIR.
module_closure() {
    local moddir=$1
    shift
    local -A seen=()
    local queue=("$@") name file dep
    while ((${#queue[@]})); do
        name=${queue[0]}
        queue=("${queue[@]:1}")
        # modinfo names dependencies with '_' or '-' as the module was built: match both.
        file=$(find "$moddir/kernel" -type f -name "${name//[-_]/[-_]}.ko*" -print -quit)
        [[ -n $file ]] || die "$EXIT_SETUP" "module $name is not in $moddir; the VM kernel must build it."
        name=$(basename -- "$file")
        name=${name%%.ko*}
        [[ -v seen[$name] ]] && continue
        seen[$name]=1
        for dep in $(modinfo -F depends "$file" | tr ',' ' '); do
            queue+=("$dep")
        done
    done
    printf '%s\n' "${!seen[@]}" | sort
}

# What a prepared kernel cache was trimmed for: a cache made for other modules is made again.
modules_stamp() {
    printf '%s\n' "${ROOT_MODULES[@]}" "${DEVICE_MODULES[@]}" | sort
}

# Download, unpack and trim a kernel package into $KERNEL_CACHE/<package>.
prepare_kernel() {
    local package=$1
    local target=$KERNEL_CACHE/$package
    local work=$target.partial
    rm -rf -- "$work"
    mkdir -p -- "$work"
    say "downloading $package"
    # apt's _apt user cannot write into the cache; as root apt would fall back to an
    # unsandboxed download anyway, with a warning: ask for that directly.
    local download=(download "$package")
    [[ $EUID -eq 0 ]] && download=(-o APT::Sandbox::User=root "${download[@]}")
    if ! (cd -- "$work" && apt_get "${download[@]}"); then
        apt_get update || die "$EXIT_SETUP" "apt-get update failed; check the apt sources and the network, then retry."
        (cd -- "$work" && apt_get "${download[@]}") ||
            die "$EXIT_SETUP" "could not download $package; see apt's message above."
    fi
    dpkg -x "$work"/*.deb "$work/root" || die "$EXIT_SETUP" "could not unpack $work/*.deb."
    rm -f -- "$work"/*.deb

    local vmlinuz version moddir
    vmlinuz=$(find "$work/root/boot" -name 'vmlinuz-*' -print -quit)
    [[ -n $vmlinuz ]] || die "$EXIT_SETUP" "$package holds no boot/vmlinuz-*; is it a kernel image package?"
    version=${vmlinuz##*/vmlinuz-}
    local option
    for option in CONFIG_DMABUF_HEAPS_SYSTEM=y CONFIG_UDMABUF=y; do
        grep -qx "$option" "$work/root/boot/config-$version" ||
            die "$EXIT_SETUP" "kernel $version lacks $option; pick a 6.12 kernel with VM_KERNEL_PACKAGE."
    done

    moddir=$work/root/lib/modules/$version
    [[ -d $moddir ]] || die "$EXIT_SETUP" "$package holds no lib/modules/$version."
    local wanted=() keep=() module
    mapfile -t wanted < <(module_closure "$moddir" "${ROOT_MODULES[@]}" "${DEVICE_MODULES[@]}")
    for module in "${wanted[@]}"; do
        keep+=(! -name "$module.ko*")
    done
    find "$moddir/kernel" -type f -name '*.ko*' "${keep[@]}" -delete
    find "$moddir/kernel" -type d -empty -delete
    rm -rf -- "$work/root/usr"
    depmod -b "$work/root" "$version" || die "$EXIT_SETUP" "depmod failed for $moddir."
    local modules_left
    modules_left=$(find "$moddir/kernel" -name '*.ko*' | wc -l)
    ((modules_left == ${#wanted[@]})) ||
        die "$EXIT_SETUP" "expected the ${#wanted[@]} modules ${wanted[*]} in $package, found $modules_left."
    modules_stamp >"$work/root/.npu_zc-modules"

    rm -rf -- "$target"
    mv -- "$work/root" "$target"
    rm -rf -- "$work"
}

# Sets KERNEL_IMAGE, KERNEL_VERSION and KERNEL_PACKAGE, preparing the cache if needed.
ensure_kernel() {
    mkdir -p -- "$KERNEL_CACHE"
    KERNEL_PACKAGE=${VM_KERNEL_PACKAGE:-}
    # A warm cache answers without asking apt anything.
    if [[ -z $KERNEL_PACKAGE && -f $KERNEL_CACHE/current ]]; then
        KERNEL_PACKAGE=$(<"$KERNEL_CACHE/current")
    fi
    if [[ -n $KERNEL_PACKAGE && -d $KERNEL_CACHE/$KERNEL_PACKAGE &&
        $(cat -- "$KERNEL_CACHE/$KERNEL_PACKAGE/.npu_zc-modules" 2>/dev/null) != "$(modules_stamp)" ]]; then
        say "the cached kernel was trimmed for other modules: preparing it again"
        rm -rf -- "${KERNEL_CACHE:?}/$KERNEL_PACKAGE"
    fi
    if [[ -z $KERNEL_PACKAGE || ! -d $KERNEL_CACHE/$KERNEL_PACKAGE ]]; then
        KERNEL_PACKAGE=$(resolve_kernel_package)
        [[ -d $KERNEL_CACHE/$KERNEL_PACKAGE ]] || prepare_kernel "$KERNEL_PACKAGE"
        if [[ -z ${VM_KERNEL_PACKAGE:-} ]]; then
            echo "$KERNEL_PACKAGE" >"$KERNEL_CACHE/current.tmp"
            mv -- "$KERNEL_CACHE/current.tmp" "$KERNEL_CACHE/current"
        fi
    fi
    KERNEL_IMAGE=$(find "$KERNEL_CACHE/$KERNEL_PACKAGE/boot" -name 'vmlinuz-*' -print -quit)
    [[ -n $KERNEL_IMAGE ]] ||
        die "$EXIT_SETUP" "the kernel cache $KERNEL_CACHE/$KERNEL_PACKAGE is damaged; delete it and retry."
    KERNEL_VERSION=${KERNEL_IMAGE##*/vmlinuz-}
}

# The script the guest runs: environment, device checks, cd, COMMAND, status file.
write_guest_script() {
    local script=$1 status_file=$2
    shift 2
    {
        echo '#!/bin/bash'
        echo '# Written by scripts/vm-run.sh for one VM run; deleted afterwards.'
        local name
        for name in PATH VIRTUAL_ENV HOME LANG LC_ALL RUST_BACKTRACE PYTEST_ADDOPTS HYPOTHESIS_STORAGE_DIRECTORY \
            ${VM_PASS_ENV:-} $(compgen -e | grep '^NPU_ZC_' || true); do
            [[ -v $name ]] && printf 'export %s=%q\n' "$name" "${!name}"
        done
        printf 'export NPU_ZC_IN_VM=1 NPU_ZC_VM_OUT=%q PYTHONDONTWRITEBYTECODE=1\n' "$OUT_DIR"
        printf 'device_modules=(%s)\n' "${DEVICE_MODULES[*]}"
        printf 'vivid_options=%q\n' "$VIVID_OPTIONS"
        # shellcheck disable=SC2016 # expanded in the guest
        echo 'export HYPOTHESIS_STORAGE_DIRECTORY=${HYPOTHESIS_STORAGE_DIRECTORY:-/tmp/hypothesis}'
        printf 'status_file=%q\n' "$status_file"
        printf 'workdir=%q\n' "$PWD"
        printf 'command=(%s)\n' "$(printf '%q ' "$@")"
        cat <<'GUEST'
fail_check() {
    echo "vm-run: error (inside the VM): $*" >&2
    echo guest-check-failed >"$status_file"
    exit 1
}

# udev may not run in the guest: create a missing node from the numbers in sysfs.
make_node() {
    local node=$1 numbers=$2 major minor
    [[ -e $node || ! -r $numbers ]] && return 0
    IFS=: read -r major minor <"$numbers"
    mkdir -p "${node%/*}" && mknod -m 600 "$node" c "$major" "$minor"
}
make_node /dev/udmabuf /sys/class/misc/udmabuf/dev
for heap in /sys/class/dma_heap/*; do
    [[ -e $heap/dev ]] && make_node "/dev/dma_heap/${heap##*/}" "$heap/dev"
done

kernel=$(uname -r)
for device in /dev/dma_heap/system /dev/udmabuf; do
    [[ -c $device ]] ||
        fail_check "$device does not exist in kernel $kernel; the VM kernel must have CONFIG_DMABUF_HEAPS_SYSTEM=y and CONFIG_UDMABUF=y."
    # Opening proves the driver answers, not just that a node exists.
    : 2>/dev/null <>"$device" ||
        fail_check "$device exists but cannot be opened read-write by $(id -un) in the VM."
done

# The test devices: a module that does not load is a broken VM, not a skip.
for module in "${device_modules[@]}"; do
    options=()
    [[ $module == vivid ]] && read -ra options <<<"$vivid_options"
    modprobe "$module" "${options[@]}" ||
        fail_check "modprobe $module failed in kernel $kernel; the VM kernel must build it (CONFIG_VIDEO_VIVID=m, CONFIG_DRM_VGEM=m)."
done
udevadm settle 2>/dev/null || true
for node in /sys/class/video4linux/*; do
    make_node "/dev/${node##*/}" "$node/dev"
done
for node in /sys/class/drm/card* /sys/class/drm/renderD*; do
    make_node "/dev/dri/${node##*/}" "$node/dev"
done

cd "$workdir" 2>/dev/null ||
    fail_check "the working directory $workdir is not reachable in the VM; run from a folder on the host's root filesystem."

"${command[@]}"
status=$?
echo "command $status" >"$status_file"
exit "$status"
GUEST
    } >"$script"
}

# ---------------------------------------------------------------------------

case ${1:-} in
    -h | --help) print_help && exit 0 ;;
    --) shift ;;
esac
(($#)) || die "$EXIT_USAGE" "no COMMAND given. Usage: scripts/vm-run.sh [--] COMMAND [ARGS...] (--help for more)."

mkdir -p -- "$CACHE_DIR" "$RUN_DIR" "$OUT_DIR"
# One set-up at a time: concurrent runs wait here instead of racing apt and the cache.
exec {setup_lock}>"$CACHE_DIR/setup.lock"
flock --nonblock "$setup_lock" || {
    say "waiting for another vm-run to finish setting up"
    flock "$setup_lock"
}
ensure_host_packages
ensure_vng
ensure_kernel
flock -u "$setup_lock"
exec {setup_lock}>&-

say "kernel $KERNEL_VERSION (Debian $KERNEL_PACKAGE), $VM_CPUS vCPU, $VM_MEMORY, software emulation, timeout ${VM_TIMEOUT}s (host set-up took ${SECONDS}s)"

guest_script=$(mktemp --suffix=.sh "$RUN_DIR/run.XXXXXXXX")
status_file=${guest_script%.sh}.status
trap 'rm -f -- "$guest_script" "$status_file"' EXIT
write_guest_script "$guest_script" "$status_file" "$@"

vng_args=(
    --run "$KERNEL_IMAGE"
    --disable-kvm # the nested /dev/kvm here cannot boot a stock kernel
    --force-9p    # virtiofsd is not in bookworm
    --cpus "$VM_CPUS" --memory "$VM_MEMORY"
    --rwdir "$RUN_DIR" --rwdir "$OUT_DIR"
    --exec "bash $(printf '%q' "$guest_script")"
)
[[ ${VM_VERBOSE:-} == 1 ]] && vng_args+=(--verbose)

# Output goes through pipes (with a socket as stdout vng was seen to hang). The VM
# runs in the background so that Ctrl-C or a CI cancel can stop it: `timeout` puts
# it in its own process group, which a terminal's SIGINT never reaches.
# The copiers ignore Ctrl-C so that the VM's last words still get through.
exec {vm_stdout}> >(trap '' INT && exec cat)
stdout_copier=$!
exec {vm_stderr}> >(trap '' INT && exec cat >&2)
stderr_copier=$!
# vng finds its helpers (virtme-run) on PATH; the guest keeps the caller's PATH.
PATH=$VENV/bin:$PATH timeout --kill-after=15 "$VM_TIMEOUT" "$VNG" "${vng_args[@]}" \
    </dev/null >&"$vm_stdout" 2>&"$vm_stderr" {vm_stdout}>&- {vm_stderr}>&- &
vm=$!
exec {vm_stdout}>&- {vm_stderr}>&-

interrupted=
trap 'interrupted=1; kill -TERM "$vm" 2>/dev/null || true' INT TERM HUP
while :; do
    vm_status=0
    wait "$vm" || vm_status=$?
    kill -0 "$vm" 2>/dev/null || break # else `wait` was cut short by a trapped signal
done
wait "$stdout_copier" "$stderr_copier" || true

guest_status=$(cat -- "$status_file" 2>/dev/null || true)
if [[ -n $interrupted ]]; then
    die 130 "interrupted; the VM was stopped."
elif [[ $guest_status =~ ^command\ ([0-9]+)$ ]]; then
    exit "${BASH_REMATCH[1]}"
elif [[ $guest_status == guest-check-failed ]]; then
    die "$EXIT_GUEST_CHECK" "the VM is not fit for DMA-BUF tests (see the message above); COMMAND was not run."
elif ((vm_status == 124 || vm_status == 137)); then
    die "$EXIT_TIMEOUT" "the VM run exceeded VM_TIMEOUT=${VM_TIMEOUT}s and was stopped; raise VM_TIMEOUT or look for a hung test."
else
    die "$EXIT_NO_STATUS" "the VM did not boot or COMMAND's exit status was lost (vng exited with $vm_status); rerun with VM_VERBOSE=1 to see the boot console."
fi
