#!/usr/bin/env bash
# Run convbench on aarch64 under user-mode emulation (qemu-user-static + binfmt_misc).
#
# Owns one job: build (once) a Debian bookworm arm64 root with debootstrap, install Python
# and convbench's dependencies from PyPI into a venv inside it, copy this checkout in, and
# run a convbench command there -- by default the correctness check of the smoke suite and
# a few benchdnn shapes, every algorithm that applies.  The root is cached OUTSIDE the
# repository, so a second run only re-copies the checkout; every step says what it does
# and how long it took.
#
# Usage (as root: debootstrap, chroot and binfmt_misc need it):
#   tools/arm64.sh                       # setup if needed, then the default check
#   tools/arm64.sh check smoke -a direct # any convbench command line instead
#   tools/arm64.sh --setup               # setup only
#   tools/arm64.sh --exec python3 -c ... # any command inside the root (venv on PATH)
#
# Environment:
#   CONVBENCH_ARM64_ROOT    the cached root     (default /var/cache/convbench-arm64)
#   CONVBENCH_ARM64_MIRROR  the Debian mirror   (default http://deb.debian.org/debian)
#   CONVBENCH_ARM64_CPU     the emulated core, qemu's -cpu name (default neoverse-n1:
#                           128-bit NEON, no SVE, like Graviton2 and Ampere Altra); also
#                           the core numba compiles for (NUMBA_CPU_NAME), because under
#                           qemu-user LLVM would read the x86 host's /proc/cpuinfo.
#
# Emulation is slow (numba's compiles run ~10-50x slower than natively): the default check
# keeps to small shapes.  Correctness only: nothing timed under emulation means anything.
set -euo pipefail

ROOT=${CONVBENCH_ARM64_ROOT:-/var/cache/convbench-arm64}
MIRROR=${CONVBENCH_ARM64_MIRROR:-http://deb.debian.org/debian}
CPU=${CONVBENCH_ARM64_CPU:-neoverse-n1}
SUITE=bookworm
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE=$ROOT/.convbench          # stage markers, inside the cached root
VENV=/opt/venv                  # paths as seen inside the root
SRC=/opt/convbench
HOST_CA=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
ROOT_CA=/etc/ssl/certs/host-ca-bundle.crt
# Small shapes that the smoke suite does not cover: stride 2 on an odd, non-square input,
# a grouped conv that is not depthwise, a dilated conv, and batch 2 with channel counts
# that are no multiple of 4 (the 128-bit lane count).
# Each algorithm at its default parameters (--defaults: gemm both blas and own), with the
# static vector profile of every variant that ran (--asm).
DEFAULT_COMMAND=(check smoke
    'mb1ic8ih15iw13oc12oh8ow7kh3kw3sh2sw2ph1pw1n"s2_odd"'
    'mb1g2ic8ih10oc8oh10kh3ph1n"grouped"'
    'mb1ic4ih12oc8oh8kh3dh1n"dilated"'
    'mb2ic6ih7oc10oh7kh1n"mb2_1x1"'
    --defaults --asm)

die() { echo "arm64.sh: $*" >&2; exit 2; }
now() { date +%s.%N; }
# step NAME CMD...: run one step, saying what it is and how long it took; its status.
# The step runs in a subshell with errexit on, so a failing command ends it there (in a
# function called from an `||` list bash would ignore errexit and carry on).
step() {
    local name=$1 t0 rc flags=$-
    shift
    echo "== $name"
    t0=$(now)
    set +e
    (set -e; "$@")
    rc=$?
    [[ $flags == *e* ]] && set -e
    printf -- '-- %s: %.1f s%s\n' "$name" "$(echo "$(now) - $t0" | bc)" \
        "$( ((rc)) && echo ", exit $rc")"
    return "$rc"
}

[[ $(id -u) == 0 ]] || die "needs root (debootstrap, chroot, binfmt_misc)"
case "$ROOT" in "$REPO"|"$REPO"/*) die "CONVBENCH_ARM64_ROOT must be outside the repository";; esac

host_packages() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
    command -v update-binfmts >/dev/null || missing+=(binfmt-support)
    command -v bc >/dev/null || missing+=(bc)
    if ((${#missing[@]})); then
        echo "installing ${missing[*]} from Debian"
        DEBIAN_FRONTEND=noninteractive apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    else
        echo "debootstrap, qemu-user-static, binfmt-support present"
    fi
}

binfmt() {
    local dir=/proc/sys/fs/binfmt_misc
    mountpoint -q "$dir" || mount binfmt_misc -t binfmt_misc "$dir"
    if [[ ! -e $dir/qemu-aarch64 ]]; then
        # the F flag opens the interpreter now, so it works inside the chroot too
        update-binfmts --enable qemu-aarch64 2>/dev/null \
            || cat /usr/lib/binfmt.d/qemu-aarch64.conf > "$dir/register"
    fi
    grep -q '^enabled' "$dir/qemu-aarch64" || die "qemu-aarch64 is not enabled in $dir"
    echo "qemu-aarch64 registered: $(grep '^interpreter' "$dir/qemu-aarch64")"
}

mounted_under_root() { findmnt -rn -o TARGET | grep -q "^$ROOT/"; }

bootstrap() {
    if [[ -e $STATE/debootstrap ]]; then
        echo "reusing $ROOT (built $(cat "$STATE/debootstrap"))"
        return
    fi
    # a root without its marker is a half-built one: start over
    mounted_under_root && die "$ROOT has mounts under it; unmount them first"
    rm -rf "$ROOT"
    mkdir -p "$(dirname "$ROOT")"
    echo "debootstrap $SUITE arm64 (minbase + python3, binutils) from $MIRROR into $ROOT"
    # binutils: objdump, which reads the code numba loaded from its cache for the static
    # vector profile (kernels/asm.py); without it `check --asm` compiles each kernel again
    # (25-50 s under emulation) and a run's rows get no profile
    debootstrap --arch=arm64 --variant=minbase \
        --include=python3,python3-venv,ca-certificates,binutils "$SUITE" "$ROOT" "$MIRROR"
    mkdir -p "$STATE"
    date -u +%FT%TZ > "$STATE/debootstrap"
}

mount_root() {
    mount -t proc proc "$ROOT/proc"
    mount -t sysfs sys "$ROOT/sys"
    mount --bind /dev "$ROOT/dev"
    mount --bind /dev/shm "$ROOT/dev/shm"   # multiprocessing's semaphores
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"  # pip reaches PyPI from inside
    # pip inside trusts what the host trusts: behind a TLS-intercepting proxy the host's
    # bundle holds the proxy's CA, which Debian's fresh bundle in the root lacks
    cp "$HOST_CA" "$ROOT$ROOT_CA"
}

unmount_root() {
    local target
    for target in dev/shm dev sys proc; do
        mountpoint -q "$ROOT/$target" && umount "$ROOT/$target"
    done
    return 0
}

# in_root CMD...: run CMD inside the root as the emulated core, the venv first on PATH
in_root() {
    chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" \
        PATH="$VENV/bin:/usr/sbin:/usr/bin:/sbin:/bin" QEMU_CPU="$CPU" NUMBA_CPU_NAME="$CPU" \
        NUMBA_CACHE_DIR=/var/cache/numba PIP_CERT="$ROOT_CA" PIP_DISABLE_PIP_VERSION_CHECK=1 \
        "$@"
}

sync_checkout() {
    # the checkout's files (tracked, plus untracked not ignored), not its caches or venvs;
    # an egg-info of the editable install stays, so pip is not needed again
    mkdir -p "$ROOT$SRC"
    find "$ROOT$SRC" -mindepth 1 -maxdepth 1 ! -name '*.egg-info' -exec rm -rf {} +
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 -I{} sh -c 'test -e "$1" && printf "%s\0" "$1"' _ {} \
        | tar --null -T - -cf -) | tar -C "$ROOT$SRC" -xf -
    echo "copied $(find "$ROOT$SRC" -type f | wc -l) files of $REPO to $ROOT$SRC"
}

root_binutils() {
    # a root built before binutils was in the list gets it here, once
    if in_root sh -c 'command -v objdump' >/dev/null; then
        echo "objdump present: $(in_root objdump --version | head -1)"
        return
    fi
    in_root apt-get update -q
    in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        binutils
}

python_packages() {
    # reinstalled when pyproject.toml changes (its dependency list lives there)
    local want
    want=$(sha256sum "$REPO/pyproject.toml" | cut -d' ' -f1)
    if [[ $(cat "$STATE/pip" 2>/dev/null) == "$want" ]]; then
        echo "venv up to date: $(in_root python -c 'import numba, numpy, llvmlite, sys
print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, numba {numba.__version__}, llvmlite {llvmlite.__version__}")')"
        return
    fi
    [[ -x $ROOT$VENV/bin/python ]] || in_root python3 -m venv "$VENV"
    in_root python -m pip install -q --upgrade pip "setuptools>=68" wheel
    # editable: later runs only re-copy the files (the import path points at $SRC)
    in_root python -m pip install -q -e "$SRC"
    in_root python -m pip list 2>/dev/null | grep -iE '^(numpy|numba|llvmlite|scipy) '
    echo "$want" > "$STATE/pip"
}

setup() {
    step "host packages" host_packages
    step "binfmt_misc" binfmt
    step "arm64 root" bootstrap
    step "mount /proc /sys /dev in the root" mount_root
    step "copy the checkout" sync_checkout
    step "objdump in the root" root_binutils
    step "python packages" python_packages
}

main() {
    local mode=convbench command=("${DEFAULT_COMMAND[@]}") status=0
    case "${1:-}" in
        --setup) mode=setup ;;
        --exec) shift; mode=exec; command=("$@"); ((${#command[@]})) || die "--exec needs a command" ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        "") ;;
        *) command=("$@") ;;
    esac
    mkdir -p "$(dirname "$ROOT")"
    exec 9>"$ROOT.lock"
    flock -n 9 || die "another tools/arm64.sh holds $ROOT.lock"
    trap unmount_root EXIT
    local t0
    t0=$(now)
    setup
    set +e   # the command's status is the script's, after the total is printed
    case $mode in
        exec) step "${command[*]}" in_root "${command[@]}" ;;
        convbench) step "convbench ${command[*]} (as $CPU)" in_root convbench "${command[@]}" ;;
    esac
    status=$?
    set -e
    printf -- '-- total: %.1f s, exit %d\n' "$(echo "$(now) - $t0" | bc)" "$status"
    return "$status"
}

main "$@"
