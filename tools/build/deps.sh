#!/bin/sh
# deps.sh [--check] [--no-fuzz] - installs (or, with --check, only looks
# for) the Debian packages octd needs.  clang's libFuzzer and OpenMP runtimes
# are included because `make check` runs a short fuzz of every parser
# (tests/e2e_fuzz.sh); --no-fuzz leaves them out for a build-only machine.
# Uses apt-get, through sudo when not root.
set -eu
PKGS="build-essential pkg-config libfftw3-dev libopenblas-dev libzmq3-dev libinih-dev
libyaml-dev check libpng-dev python3 python3-numpy systemd procps patchelf libcivetweb-dev libssl-dev
libhdf5-dev python3-zmq python3-h5py python3-distributed python3-pytest
help2man curl"
# octweb's browser test (tests/e2e_web.sh): Chromium driven by puppeteer-core
# from npm, installed into build/web-node (never downloads a browser)
WEB_PKGS="chromium"
command -v node >/dev/null 2>&1 || WEB_PKGS="$WEB_PKGS nodejs"
command -v npm >/dev/null 2>&1 || WEB_PKGS="$WEB_PKGS npm"
WEB_NODE="$(cd "$(dirname "$0")/../.." && pwd)/build/web-node"
web_driver() {
    [ -d "$WEB_NODE/node_modules/puppeteer-core" ] && return 0
    [ -n "$CHECK_ONLY" ] && { echo "deps: missing: puppeteer-core in $WEB_NODE (make deps)" >&2; return 1; }
    echo "deps: npm install puppeteer-core into $WEB_NODE"
    mkdir -p "$WEB_NODE"
    # not fatal: without the driver (no registry here) e2e_web skips, saying so
    PUPPETEER_SKIP_DOWNLOAD=1 PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1 \
        npm install --prefix "$WEB_NODE" --no-audit --no-fund --no-save puppeteer-core@23.11.1 ||
        echo "deps: npm install puppeteer-core failed: tests/e2e_web.sh will skip" >&2
}
# test tools of `make check`: libFuzzer (e2e_fuzz), valgrind (e2e_valgrind,
# make valgrind), ss (e2e_security), stress-ng (CPU load beside the tests,
# e.g. `stress-ng --cpu 2` while `make check` runs: README "Testing")
FUZZ_PKGS="clang libclang-rt-14-dev libomp-14-dev valgrind iproute2 stress-ng"
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
[ -z "$WITH_FUZZ" ] || PKGS="$PKGS $FUZZ_PKGS $WEB_PKGS"
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
    [ -z "$WITH_FUZZ" ] || web_driver || exit 1
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
[ -z "$WITH_FUZZ" ] || web_driver
