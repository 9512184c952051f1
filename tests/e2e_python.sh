#!/bin/bash
# e2e_python.sh - the Python package (tools/python/octd, SPEC 10.6) and
# recording (SPEC 10.5): runs the pytest suite tests/python/ against the
# programs in $BIN and liboct.so of $BUILD (Subscriber vs octgrab, control
# round trip, recordings read back, disk full / removed directory / SIGTERM,
# Engine vs octproc and a float64 reference, the Dask path on a LocalCluster
# of 2 worker processes); checks liboct.so's soname.
# Exit 0 pass, 77 skip, else fail (pytest finding no test is a failure).
set -u
BIN=${BIN:-bin}
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
fail() { echo "FAIL: $*"; exit 1; }
for p in octd octgrab octproc; do
    [ -x "$BIN/$p" ] || fail "$BIN/$p not built"
done
LIB=$BUILD/liboct.so.0
[ -e "$LIB" ] || fail "$LIB not built (make lib)"
soname=$(objdump -p "$LIB" 2>/dev/null | awk '/SONAME/ {print $2}')
[ "$soname" = liboct.so.0 ] || fail "$LIB: soname '$soname', expected liboct.so.0"
missing=$("$PYTHON" - <<'PY'
import importlib.util
print(" ".join(m for m in ("numpy", "zmq", "h5py", "pytest", "distributed")
               if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
    echo "SKIP e2e_python: $PYTHON lacks: $missing (make deps)"; exit 77
fi
export BIN OCTD_LIB=$LIB PYTHONPATH=tools/python${PYTHONPATH:+:$PYTHONPATH}
timeout 300 "$PYTHON" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning tests/python
rc=$?
case $rc in
0) echo "PASS e2e_python" ;;
5) fail "pytest collected no test" ;;
124) fail "pytest did not finish within 300 s" ;;
*) fail "pytest exit $rc" ;;
esac
