#!/bin/sh
# deps.sh [--check] - installs (or, with --check, only looks for) the Debian
# packages octd needs.  Uses apt-get, through sudo when not root.
set -eu
PKGS="build-essential pkg-config libfftw3-dev libopenblas-dev libzmq3-dev libinih-dev
libyaml-dev check libpng-dev python3 python3-numpy systemd procps patchelf"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    [ "${1:-}" = "--check" ] || echo "deps: all packages present"
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
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
