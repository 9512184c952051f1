#!/bin/sh
# deps.sh [--check] [--no-fuzz] - installs (or, with --check, only looks
# for) the Debian packages octd needs.  clang's libFuzzer and OpenMP runtimes
# are included because `make check` runs a short fuzz of every parser
# (tests/e2e_fuzz.sh); --no-fuzz leaves them out for a build-only machine.
# Uses apt-get, through sudo when not root.
set -eu
PKGS="build-essential pkg-config libfftw3-dev libopenblas-dev libzmq3-dev libinih-dev
libyaml-dev check libpng-dev python3 python3-numpy systemd procps patchelf
libcivetweb-dev help2man curl"
# test tools of `make check`: libFuzzer (e2e_fuzz), valgrind (e2e_valgrind,
# make valgrind), ss (e2e_security)
FUZZ_PKGS="clang libclang-rt-14-dev libomp-14-dev valgrind iproute2"
WITH_FUZZ=1
CHECK_ONLY=""
for a in "$@"; do
    case "$a" in
    --check) CHECK_ONLY=1 ;;
    --fuzz) WITH_FUZZ=1 ;;
    --no-fuzz) WITH_FUZZ="" ;;
    *) echo "deps.sh: unknown option $a" >&2; exit 2 ;;
    esac
done
[ -z "$WITH_FUZZ" ] || PKGS="$PKGS $FUZZ_PKGS"
find_missing() {
    missing=""
    for p in $PKGS; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
}
find_missing
if [ -z "$CHECK_ONLY" ] && [ -n "$missing" ] && command -v flock >/dev/null 2>&1; then
    # make -j runs this from two sub-makes at once: one installs, the other
    # waits for it and then finds nothing missing.
    exec 9>"${TMPDIR:-/tmp}/octd-deps.lock"
    flock 9
    find_missing
fi
if [ -z "$missing" ]; then
    [ -n "$CHECK_ONLY" ] || echo "deps: all packages present"
    exit 0
fi
if [ -n "$CHECK_ONLY" ]; then
    echo "deps: missing:$missing" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
