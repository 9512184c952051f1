#!/bin/bash
# e2e_systemd.sh - the systemd side of octd (issue 4 item 7):
#  - tools/build/install.sh into a DESTDIR places binaries, headers, the
#    library + pkg-config file, unit, sysusers/tmpfiles snippets, examples;
#    PREFIX is substituted in the unit and the .pc file;
#  - `systemd-analyze verify` passes on the installed unit (ExecStart's path
#    pointed at the built octd, the only change);
#  - the sysusers snippet creates user and group octd in a scratch root, the
#    tmpfiles snippet is accepted;
#  - the unit has the ordering and hardening of README "Reliability" (and
#    not the directives that would break CUDA or the shared blocks); its
#    `systemd-analyze security --offline=true` score is the README's;
#  - the installed example octd.ini + profile pass `octd --check-config` as
#    shipped (only /etc/octd and the save directory relocated), and with MSI
#    switched on as the profile's comments say (octsim masks).
# Exit 0 pass, 77 skip (no systemd-analyze), else fail.
set -u
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
command -v systemd-analyze >/dev/null || { echo "SKIP e2e_systemd: no systemd-analyze"; exit 77; }
for p in octd octsim octctl octgrab octproc octbench; do
    [ -x "$BIN/$p" ] || { echo "FAIL: $BIN/$p not built"; exit 1; }
done
T=$(mktemp -d /tmp/octd-e2e-systemd.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- install into a DESTDIR -----------------------------------------------------
. tests/helpers/install_destdir.sh
install_destdir "$T"
for f in opt/octd/bin/octd opt/octd/bin/octctl opt/octd/bin/octgrab opt/octd/bin/octsim \
         opt/octd/bin/octproc opt/octd/bin/octbench opt/octd/include/octd/oct_ipc.h \
         opt/octd/include/octd/oct_types.h opt/octd/lib/liboctipc.so.1.2.0 opt/octd/lib/liboctipc.so.1 \
         opt/octd/lib/liboctipc.so opt/octd/lib/pkgconfig/octipc.pc etc/systemd/system/octd.service \
         etc/sysusers.d/octd.conf etc/tmpfiles.d/octd.conf etc/octd/octd.ini etc/octd/profile.yaml \
         opt/octd/share/doc/octd/examples/octd.ini opt/octd/share/doc/octd/examples/profile.yaml; do
    [ -e "$R/$f" ] || fail "install: no $f"
done
[ -x "$R/opt/octd/bin/octd" ] || fail "octd not executable"
grep -q "^ExecStart=/opt/octd/bin/octd --config /etc/octd/octd.ini$" "$R/etc/systemd/system/octd.service" ||
    fail "PREFIX not substituted in the unit: $(grep ExecStart "$R/etc/systemd/system/octd.service")"
grep -q "^prefix=/opt/octd$" "$R/opt/octd/lib/pkgconfig/octipc.pc" || fail "PREFIX not in octipc.pc"
grep -q "^Version: 9.8.7$" "$R/opt/octd/lib/pkgconfig/octipc.pc" || fail "VERSION not in octipc.pc"
! grep -q "@" "$R/opt/octd/lib/pkgconfig/octipc.pc" || fail "unsubstituted @...@ in octipc.pc"
if command -v pkg-config >/dev/null; then
    PKG_CONFIG_PATH="$R/opt/octd/lib/pkgconfig" pkg-config --cflags --libs octipc | grep -q -- "-loctipc" ||
        fail "pkg-config octipc"
fi
# the installed header + library are usable by an acquisition program
cat >"$T/prod.c" <<'EOF'
#include <oct_ipc.h>
#include <stdio.h>
int main(void)
{
    oct_ring_consumer *c = NULL;
    oct_error e;
    /* a ring that does not exist: the library answers with an error */
    oct_err rc = oct_ring_consumer_open(&c, "/octd-e2e-no-such-ring-here", &e);
    printf("%s: %s\n", oct_strerror(rc), e.msg);
    return rc == OCT_OK;
}
EOF
if command -v cc >/dev/null; then
    cc -I"$R/opt/octd/include/octd" "$T/prod.c" -L"$R/opt/octd/lib" -loctipc -o "$T/prod" 2>"$T/cc.log" ||
        fail "a program against the installed header + library does not build: $(head -5 "$T/cc.log")"
    LD_LIBRARY_PATH="$R/opt/octd/lib" "$T/prod" >/dev/null || fail "a program against liboctipc does not run"
fi
# a second install keeps the operator's configuration
echo "; edited" >>"$R/etc/octd/octd.ini"
PREFIX=/opt/octd DESTDIR="$T/root" BUILD="$BUILD" BIN="$BIN" VERSION=9.8.7 tools/build/install.sh >/dev/null 2>&1 ||
    fail "second install"
grep -q "; edited" "$R/etc/octd/octd.ini" || fail "install overwrote /etc/octd/octd.ini"
echo "ok   install.sh: PREFIX=/opt/octd DESTDIR=... places everything, keeps /etc/octd"

# ---- systemd-analyze verify ------------------------------------------------------
mkdir -p "$T/unit"
sed "s#/opt/octd/bin/octd#$(cd "$BIN" && pwd)/octd#g" "$R/etc/systemd/system/octd.service" >"$T/unit/octd.service"
systemd-analyze verify "$T/unit/octd.service" >"$T/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$T/verify.log")"
# warnings about the unit itself fail too (verify exits 0 on some of them)
if grep -i "octd.service" "$T/verify.log" | grep -vi "not found\|no such" | grep -q .; then
    fail "systemd-analyze verify complains: $(cat "$T/verify.log")"
fi
for k in "Type=notify" "NotifyAccess=main" "WatchdogSec=" "Restart=on-failure" "User=octd" "Group=octd" \
         "ProtectSystem=strict" "ProtectHome=yes" "NoNewPrivileges=yes" "DeviceAllow=/dev/nvidiactl" \
         "ExecReload=/bin/kill -HUP \$MAINPID"; do
    grep -qF "$k" "$T/unit/octd.service" || fail "unit lacks $k"
done
! grep -Eq "^(PrivateDevices|PrivateIPC)=yes" "$T/unit/octd.service" || fail "unit hides devices or IPC"
for k in "Wants=network-online.target" "After=network.target network-online.target" \
         "DeviceAllow=char-nvidia-caps r" "RestrictRealtime=yes" "ProtectProc=invisible" \
         "SystemCallFilter=@system-service" "SystemCallErrorNumber=EPERM" "LockPersonality=yes" \
         "RestartPreventExitStatus=78"; do
    grep -qxF "$k" "$T/unit/octd.service" || fail "unit lacks $k"
done
# RemoveIPC would delete the shared blocks, MemoryDenyWriteExecute breaks CUDA's JIT
! grep -Eq "^(RemoveIPC|MemoryDenyWriteExecute|PrivateUsers)=" "$T/unit/octd.service" ||
    fail "unit sets a directive that breaks the shared blocks or CUDA: $(grep -E "^(RemoveIPC|MemoryDenyWriteExecute|PrivateUsers)=" "$T/unit/octd.service")"
echo "ok   systemd-analyze verify octd.service; ordering and hardening directives present"
score=$(systemd-analyze security --offline=true --no-pager "$T/unit/octd.service" 2>/dev/null |
    sed -n 's/.*Overall exposure level for octd.service: \([0-9.]*\).*/\1/p')
if [ -n "$score" ]; then
    grep -q "scores \*\*$score " README.md || fail "README does not give the measured security score $score"
    echo "ok   systemd-analyze security --offline=true: $score (as in README)"
else
    echo "note: systemd-analyze security --offline=true gave no score here (not checked)"
fi

# ---- sysusers / tmpfiles -----------------------------------------------------------
if command -v systemd-sysusers >/dev/null; then
    mkdir -p "$T/sys/etc"
    systemd-sysusers --root="$T/sys" "$R/etc/sysusers.d/octd.conf" >"$T/sysusers.log" 2>&1 ||
        fail "systemd-sysusers: $(cat "$T/sysusers.log")"
    grep -q "^octd:" "$T/sys/etc/passwd" && grep -q "^octd:" "$T/sys/etc/group" || fail "sysusers made no user/group octd"
    echo "ok   sysusers: user and group octd"
fi
if command -v systemd-tmpfiles >/dev/null; then
    cp "$T/sys/etc/passwd" "$T/sys/etc/group" "$T/" 2>/dev/null
    systemd-tmpfiles --root="$T/sys" --create "$R/etc/tmpfiles.d/octd.conf" >"$T/tmpfiles.log" 2>&1 ||
        fail "systemd-tmpfiles: $(cat "$T/tmpfiles.log")"
    [ -d "$T/sys/var/lib/octd/saved" ] || fail "tmpfiles did not create the save directory"
    echo "ok   tmpfiles: /var/lib/octd/saved"
fi

# ---- the example configuration is valid as shipped ----------------------------------
mkdir -p "$T/etc"
cp "$R/etc/octd/profile.yaml" "$T/etc/"
cmp -s "$R/etc/octd/profile.yaml" "$R/opt/octd/share/doc/octd/examples/profile.yaml" ||
    fail "etc/octd/profile.yaml differs from the shipped example"
sed -e "s#/etc/octd/#$T/etc/#" -e "s#/var/lib/octd/saved#$T#" "$R/opt/octd/share/doc/octd/examples/octd.ini" >"$T/etc/octd.ini"
"$BIN/octd" --config "$T/etc/octd.ini" --check-config >"$T/check.log" 2>&1 ||
    fail "the example configuration as installed is invalid: $(cat "$T/check.log")"
echo "ok   the installed example octd.ini + profile.yaml pass --check-config as shipped (no masks)"
# MSI as the profile's comments describe: methods cfd, msi + the masks line
sed -i -e 's/^methods: \[cfd\]/methods: [cfd, msi]/' -e 's/^  # masks:/  masks:/' "$T/etc/profile.yaml"
grep -q "^methods: \[cfd, msi\]" "$T/etc/profile.yaml" && grep -q "^  masks: {file: masks.npy" "$T/etc/profile.yaml" ||
    fail "the example profile's commented MSI set-up is not where its comments say"
"$BIN/octd" --config "$T/etc/octd.ini" --check-config >"$T/check2.log" 2>&1 &&
    fail "MSI without masks.npy passes --check-config"
grep -q "msi.masks.file.*masks.npy" "$T/check2.log" || fail "missing masks: the error names no key/file: $(cat "$T/check2.log")"
"$BIN/octsim" masks --samples 1024 --count 512 --output "$T/etc/masks.npy" >/dev/null 2>&1 || fail "octsim masks"
"$BIN/octd" --config "$T/etc/octd.ini" --check-config >"$T/check3.log" 2>&1 ||
    fail "the example with MSI and octsim masks is invalid: $(cat "$T/check3.log")"
echo "ok   with MSI switched on as documented: 78 without masks.npy, valid with octsim masks"
echo "PASS e2e_systemd"
