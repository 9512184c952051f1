#!/bin/bash
# e2e_docs.sh - the project documents its own contract (issue 14.9), ~10 s:
#  - ipc/PROTOCOL.md has a table row (offset, field) for every offset that
#    oct_ipc.h's static asserts fix, in the section of its struct, and no
#    row the header does not have;
#  - config/CONFIGURATION.md names every octd.ini section and key that
#    config/ini.c accepts; kernels/MATH.md covers SPEC 2, 9 and 10;
#  - every program's --help points to the documents (and to nothing outside
#    the repository), and README links them;
#  - `make install` (DESTDIR) puts them in share/doc/octd and the man pages,
#    generated from --help by help2man, in share/man/man1 and man8; each man
#    page renders and carries its program's options.
# Exit 0 pass, 77 skip, else fail.
set -u
BUILD=${BUILD:-build}
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
PROGS="octd octctl octgrab octsim octproc octbench octweb"
for p in $PROGS; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_docs: $BIN/$p not built"; exit 77; }
done
command -v help2man >/dev/null || { echo "SKIP e2e_docs: no help2man (make deps)"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-docs.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$PYTHON" - <<'PYEOF' || fail "PROTOCOL.md / CONFIGURATION.md disagree with the code (above)"
import re, sys
hdr = open("ipc/oct_ipc.h").read()
doc = open("ipc/PROTOCOL.md").read()
asserts = re.findall(r"OCT_ABI_ASSERT\(offsetof\((\w+), (\w+)\) == (\d+)", hdr)
sections = {}
for m in re.finditer(r"#### `(\w+)`\n(.*?)(?=\n#### |\n## |\Z)", doc, re.S):
    rows = re.findall(r"^\| (\d+) \| [^|]* \| `(\w+)` \|", m.group(2), re.M)
    sections[m.group(1)] = {f: int(o) for o, f in rows}
bad = []
for s, f, o in asserts:
    got = sections.get(s, {}).get(f)
    if got != int(o):
        bad.append(f"{s}.{f}: header {o}, PROTOCOL.md {got}")
known = {(s, f) for s, f, _ in asserts}
for s, rows in sections.items():
    for f in rows:
        if (s, f) not in known:
            bad.append(f"{s}.{f}: in PROTOCOL.md, not asserted in oct_ipc.h")
if bad:
    print("\n".join(bad)); sys.exit(1)
print(f"ok   PROTOCOL.md: {len(asserts)} offsets of oct_ipc.h, every one in its table")
ini = open("config/ini.c").read()
keys = re.findall(r'\[K_\w+\] = \{"(\w+)", "(\w+)"\}', ini)
conf = open("config/CONFIGURATION.md").read()
miss = [f"[{s}] {k}" for s, k in keys if f"`[{s}]`" not in conf or f"| `{k}` |" not in conf]
if len(keys) < 15 or miss:
    print(f"CONFIGURATION.md misses {miss} ({len(keys)} keys in ini.c)"); sys.exit(1)
print(f"ok   CONFIGURATION.md: all {len(keys)} octd.ini keys")
math = open("kernels/MATH.md").read()
for t in ["CFD", "MSI", "CMS", "Dispersion", "k-linearisation", "slab_mean", "ssada", "decor",
          "registration", "Gray levels", "1e-4"]:
    if t not in math:
        print(f"MATH.md does not cover {t}"); sys.exit(1)
print("ok   MATH.md covers SPEC 2, 9 and 10")
PYEOF

for p in $PROGS; do
    h=$("$BIN/$p" --help 2>&1)
    echo "$h" | grep -q "^Documentation: man octd" || fail "$p --help does not point to the documentation"
    for d in CONFIGURATION.md PROTOCOL.md MATH.md; do
        echo "$h" | grep -q "$d" || fail "$p --help does not name $d"
    done
    echo "$h" | grep -qE "SPEC[ .]|/work/|shared/" && fail "$p --help points outside the repository: $(echo "$h" | grep -E "SPEC[ .]|/work/|shared/" | head -1)"
done
echo "ok   every --help points to man pages and CONFIGURATION.md, PROTOCOL.md, MATH.md"
for d in ipc/PROTOCOL.md config/CONFIGURATION.md kernels/MATH.md; do
    grep -q "($d)" README.md || fail "README does not link $d"
done
echo "ok   README links the three documents"

. tests/helpers/install_destdir.sh
install_destdir "$T"
for f in PROTOCOL.md CONFIGURATION.md MATH.md README.md; do
    [ -s "$R/opt/octd/share/doc/octd/$f" ] || fail "install: no share/doc/octd/$f"
done
for p in $PROGS; do
    s=1
    [ $p = octd ] && s=8
    m="$R/opt/octd/share/man/man$s/$p.$s"
    [ -s "$m" ] || fail "install: no $m"
    txt=$(MANWIDTH=100 man -l "$m" 2>/dev/null) || fail "man -l $m does not render"
    echo "$txt" | grep -q "^NAME" || fail "$p.$s has no NAME section"
    opt=$("$BIN/$p" --help 2>&1 | grep -o -- '--[a-z][a-z-]*' | head -1)
    echo "$txt" | grep -q -- "$opt" || fail "$p.$s does not carry the options ($opt)"
done
MANWIDTH=100 man -l "$R/opt/octd/share/man/man8/octd.8" | grep -q -- "--check-config" || fail "octd.8: no --check-config"
echo "ok   make install: share/doc/octd/{PROTOCOL,CONFIGURATION,MATH}.md, man pages (help2man) for $PROGS"
exit 0
