#!/bin/bash
# install.sh - `make install` (PREFIX, DESTDIR, BUILD, BIN, VERSION from make).
#   $PREFIX/bin/                 octd octctl octgrab octsim octproc octbench
#   $PREFIX/include/octd/        oct_ipc.h oct_ipc_types.h oct_options.h (the shared-memory
#                                ABI; oct_ipc.h stands alone), oct_types.h (the same types)
#   $PREFIX/lib/                 liboctipc.so.$IPC_LIBVERSION (+ .so.1, .so links), liboctipc.a
#   $PREFIX/lib/pkgconfig/       octipc.pc
#   $PREFIX/lib/                 liboct.so.$VERSION (+ .so.0, .so links: octd.Engine)
#   Python package octd + octring.py: /usr/lib/python3/dist-packages (PREFIX=/usr),
#                                $PREFIX/lib/python3/dist-packages otherwise
#   $PREFIX/share/doc/octd/      README, PROTOCOL.md, CONFIGURATION.md, MATH.md,
#                                examples/ (octd.ini, profile.yaml, octweb.ini)
#   $PREFIX/share/man/man1, man8 the man pages (make man: help2man from --help)
#   $PREFIX/share/octd/octweb/   the console's page (octweb); $PREFIX/lib/octd/octweb-tls.so
#   systemd unit, sysusers.d and tmpfiles.d snippets: under $PREFIX/lib/ for
#     PREFIX /usr or /usr/local (on systemd's search paths), else under /etc/
#     (SYSTEMD_PREFIX= overrides where: e.g. /usr/lib)
#   /etc/octd/octd.ini, profile.yaml, octweb.ini: the examples, only when absent
#     (an operator's configuration is never overwritten)
# The unit's /usr/local/bin/octd becomes $PREFIX/bin/octd.  Everything goes
# under DESTDIR when set (packaging); nothing is started or enabled.
set -euo pipefail
cd "$(dirname "$0")/../.."
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
VERSION=${VERSION:-0.0.0}
IPC_LIBVERSION=${IPC_LIBVERSION:-1.2.0}
case "$PREFIX" in /usr|/usr/local) SD_DEFAULT=$PREFIX/lib ;; *) SD_DEFAULT=/etc ;; esac
SD=${SYSTEMD_PREFIX:-$SD_DEFAULT}
SYSCONF=${SYSCONFDIR:-/etc}/octd
D=$DESTDIR

say() { echo "install: $*"; }
inst() { # mode src dst
    install -D -m "$1" "$2" "$3"
    say "$3"
}

for p in octd octctl octgrab octsim octproc octbench octweb; do
    [ -x "$BIN/$p" ] || { echo "install: $BIN/$p is missing: run make first" >&2; exit 1; }
    inst 0755 "$BIN/$p" "$D$PREFIX/bin/$p"
done
for h in ipc/oct_ipc.h ipc/oct_ipc_types.h ipc/oct_options.h kernels/oct_types.h; do
    inst 0644 "$h" "$D$PREFIX/include/octd/$(basename "$h")"
done
SO="$BUILD/liboctipc.so.$IPC_LIBVERSION"
[ -f "$SO" ] || { echo "install: $SO is missing: run make lib" >&2; exit 1; }
inst 0755 "$SO" "$D$PREFIX/lib/liboctipc.so.$IPC_LIBVERSION"
ln -sfn "liboctipc.so.$IPC_LIBVERSION" "$D$PREFIX/lib/liboctipc.so.1"
ln -sfn "liboctipc.so.1" "$D$PREFIX/lib/liboctipc.so"
say "$D$PREFIX/lib/liboctipc.so.1 liboctipc.so (links)"
[ ! -f "$BUILD/liboctipc.a" ] || inst 0644 "$BUILD/liboctipc.a" "$D$PREFIX/lib/liboctipc.a"
mkdir -p "$D$PREFIX/lib/pkgconfig"
sed -e "s#@PREFIX@#$PREFIX#g" -e "s#@VERSION@#$VERSION#g" ipc/octipc.pc.in >"$D$PREFIX/lib/pkgconfig/octipc.pc"
chmod 0644 "$D$PREFIX/lib/pkgconfig/octipc.pc"
say "$D$PREFIX/lib/pkgconfig/octipc.pc"

# liboct.so (soname liboct.so.0) and the Python package octd (SPEC 10.6) in
# Debian python3's dist-packages for this prefix
if [ -f "$BUILD/liboct.so" ]; then
    inst 0755 "$BUILD/liboct.so" "$D$PREFIX/lib/liboct.so.$VERSION"
    ln -sfn "liboct.so.$VERSION" "$D$PREFIX/lib/liboct.so.0"
    ln -sfn "liboct.so.0" "$D$PREFIX/lib/liboct.so"
    case "$PREFIX" in /usr) PYDIR=/usr/lib/python3/dist-packages ;; *) PYDIR=$PREFIX/lib/python3/dist-packages ;; esac
    for f in tools/python/octring.py tools/python/octd/*.py; do
        inst 0644 "$f" "$D$PYDIR/${f#tools/python/}"
    done
    printf 'LIBDIR = %s\n' "'$PREFIX/lib'" >"$D$PYDIR/octd/_installed.py"
    say "$D$PYDIR/octd/_installed.py"
else
    echo "install: $BUILD/liboct.so is missing: liboct.so and the Python package not installed (make lib)" >&2
fi

mkdir -p "$D$SD/systemd/system"
sed -e "s#/usr/local/bin/#$PREFIX/bin/#g" -e "s#/usr/local/share/#$PREFIX/share/#g" \
    -e "s#/etc/octd/#$SYSCONF/#g" systemd/octd.service >"$D$SD/systemd/system/octd.service"
chmod 0644 "$D$SD/systemd/system/octd.service"
say "$D$SD/systemd/system/octd.service"
# octweb: the console's page, its TLS helper, unit and example configuration
inst 0755 "$BIN/octweb-tls.so" "$D$PREFIX/lib/octd/octweb-tls.so"
for f in tools/octweb/www/*; do
    inst 0644 "$f" "$D$PREFIX/share/octd/octweb/$(basename "$f")"
done
sed -e "s#/usr/local/bin/#$PREFIX/bin/#g" -e "s#/usr/local/share/#$PREFIX/share/#g" \
    -e "s#/etc/octd/#$SYSCONF/#g" systemd/octweb.service >"$D$SD/systemd/system/octweb.service"
chmod 0644 "$D$SD/systemd/system/octweb.service"
say "$D$SD/systemd/system/octweb.service"
inst 0644 systemd/octweb.ini "$D$PREFIX/share/doc/octd/examples/octweb.ini"
inst 0644 systemd/octd.sysusers "$D$SD/sysusers.d/octd.conf"
inst 0644 systemd/octd.tmpfiles "$D$SD/tmpfiles.d/octd.conf"

inst 0644 systemd/octd.ini "$D$PREFIX/share/doc/octd/examples/octd.ini"
inst 0644 systemd/profile.yaml "$D$PREFIX/share/doc/octd/examples/profile.yaml"
[ -f README.md ] && inst 0644 README.md "$D$PREFIX/share/doc/octd/README.md"
# the contract, beside the code it describes in the tree (issue 14.9)
for f in ipc/PROTOCOL.md config/CONFIGURATION.md kernels/MATH.md; do
    inst 0644 "$f" "$D$PREFIX/share/doc/octd/$(basename "$f")"
done
# man pages generated from --help (make man)
for m in "$BUILD"/man/*.[18]; do
    [ -f "$m" ] || { echo "install: no man pages in $BUILD/man: run make man" >&2; exit 1; }
    inst 0644 "$m" "$D$PREFIX/share/man/man${m##*.}/$(basename "$m")"
done
for f in octd.ini profile.yaml octweb.ini; do
    if [ -e "$D$SYSCONF/$f" ]; then
        say "$D$SYSCONF/$f exists: kept (the example is in $PREFIX/share/doc/octd/examples/)"
    else
        mkdir -p "$D$SYSCONF"
        sed -e "s#/etc/octd/#$SYSCONF/#g" "systemd/$f" >"$D$SYSCONF/$f.tmp"
        chmod 0644 "$D$SYSCONF/$f.tmp"
        mv "$D$SYSCONF/$f.tmp" "$D$SYSCONF/$f"
        say "$D$SYSCONF/$f"
    fi
done
cat <<EOT
install: done.  Next steps (as root, without DESTDIR):
  systemd-sysusers octd.conf && systemd-tmpfiles --create octd.conf
  the example profile runs CFD; for MSI make masks (octsim masks --samples M --count R --output $SYSCONF/masks.npy) and enable them in $SYSCONF/profile.yaml
  $PREFIX/bin/octd --config $SYSCONF/octd.ini --check-config
  systemctl daemon-reload && systemctl enable --now octd
  systemctl enable --now octweb    # the console: http://127.0.0.1:8080/ ($SYSCONF/octweb.ini)
EOT
