# install_destdir.sh - sourced by the e2e scripts that test `make install`:
# install_destdir DIR builds the IPC library if needed (make check does not
# build it) and installs everything with PREFIX=/opt/octd into DIR/root,
# setting R to that root.  Needs BUILD, BIN and a fail() of the caller.
install_destdir() {
    local t=$1
    # the shared and static liboctipc with their links and the uninstalled .pc
    make -s BUILD="$BUILD" BIN="$BIN" lib man >"$t/make.log" 2>&1 ||
        fail "cannot build liboctipc and the man pages (make lib man): $(tail -3 "$t/make.log")"
    PREFIX=/opt/octd DESTDIR="$t/root" BUILD="$BUILD" BIN="$BIN" VERSION=9.8.7 tools/build/install.sh \
        >"$t/install.log" 2>&1 || fail "install.sh: $(tail -5 "$t/install.log")"
    R="$t/root"
}
