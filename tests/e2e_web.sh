#!/bin/bash
# e2e_web.sh - the operator console in a real browser (issue 16):
#  octsim (volumes 32 x 64 x 256, 10 frames/s) -> octd (CPU) -> octweb ->
#  headless Chromium driven by puppeteer-core (tests/web/e2e_web.js): live
#  images non-blank and updating; a slider changes `octctl get` and the next
#  image's params_gen; an invalid value shows octd's reason and the control
#  returns; a click on the en-face image moves the cross-sections;
#  snapshot -> review -> online; a viewer cannot change values; two
#  browsers at once; a wrong token is refused; TLS (page and WebSocket over
#  https, self-signed certificate); octd restarted under octweb (it
#  re-attaches); a screenshot saved in
#  ${ART:-build/test-artefacts}/octweb.png.  Also octweb's own checks: a
#  non-loopback address without a token, a viewer token alone, a bad
#  configuration line, a foreign WebSocket Origin (refused).
#  Exit 0 pass, 77 skip (no Chromium / Node / driver), else fail.  KEEP=1 keeps $T.
set -u
BIN=${BIN:-bin}
PYTHON=${PYTHON:-/usr/bin/python3}
NODE_DIR=${NODE_DIR:-build/web-node}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
ART=${ART:-build/test-artefacts}
for p in octd octsim octctl octweb; do
    [ -x "$BIN/$p" ] || { echo "SKIP e2e_web: $BIN/$p not built"; exit 77; }
done
[ -n "$CHROMIUM" ] || { echo "SKIP e2e_web: no chromium (make deps installs it)"; exit 77; }
command -v node >/dev/null || { echo "SKIP e2e_web: no node (make deps installs nodejs)"; exit 77; }
[ -d "$NODE_DIR/node_modules/puppeteer-core" ] || { echo "SKIP e2e_web: no $NODE_DIR/node_modules/puppeteer-core (make deps)"; exit 77; }
T=$(mktemp -d /tmp/octd-e2e-web.XXXXXX)
N=/octe2e-w$$
. tests/helpers/e2e_lib.sh
E2E_LOGS=("$T/octd.log" "$T/octweb.log" "$T/octsim.log")
mkdir -p "$ART"
ART=$(cd "$ART" && pwd)

# ---- octweb's refusals (no octd needed) ------------------------------------
printf 'operator-token-0123456789abcdef\n' >"$T/op.token"
printf 'viewer-token-0123456789abcdef\n' >"$T/view.token"
chmod 600 "$T/op.token" "$T/view.token"
"$BIN/octweb" --listen 0.0.0.0:18080 --check-config >"$T/out" 2>&1
[ $? -eq 78 ] && grep -q 'requires an operator token' "$T/out" || fail "non-loopback without a token: $(cat "$T/out")"
"$BIN/octweb" --viewer-token-file "$T/view.token" --check-config >"$T/out" 2>&1
[ $? -eq 78 ] || fail "a viewer token alone accepted: $(cat "$T/out")"
printf '[web]\nlisten = 127.0.0.1:1\nbogus = 1\n' >"$T/bad.ini"
"$BIN/octweb" --config "$T/bad.ini" --check-config >"$T/out" 2>&1
[ $? -eq 78 ] && grep -q 'bad.ini:3: unknown key \[web\] bogus' "$T/out" || fail "bad config line: $(cat "$T/out")"
chmod 644 "$T/op.token"
"$BIN/octweb" --operator-token-file "$T/op.token" --check-config >"$T/out" 2>&1
[ $? -eq 78 ] && grep -q 'readable by others' "$T/out" || fail "world-readable token accepted: $(cat "$T/out")"
chmod 600 "$T/op.token"
echo "ok   octweb refuses: no token beyond loopback, viewer token alone, unknown key (file:line), readable token"
"$BIN/octweb" --config systemd/octweb.ini --check-config >"$T/out" 2>&1 || fail "the example octweb.ini: $(cat "$T/out")"
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$T/unit"
    sed "s#/usr/local/bin/octweb#$(cd "$BIN" && pwd)/octweb#g" systemd/octweb.service >"$T/unit/octweb.service"
    systemd-analyze verify "$T/unit/octweb.service" >"$T/out" 2>&1 || fail "systemd-analyze verify octweb.service: $(cat "$T/out")"
    grep -i "octweb.service" "$T/out" | grep -vi "not found\|no such" | grep -q . && fail "verify complains: $(cat "$T/out")"
    grep -q '^After=.*octd.service' "$T/unit/octweb.service" || fail "octweb.service is not ordered after octd"
    echo "ok   example octweb.ini; systemd-analyze verify octweb.service"
fi

# ---- octsim -> octd -> octweb ----------------------------------------------
L=32 A=64 M=256
cat >"$T/profile.yaml" <<EOF
geometry: {samples: $M, ascans: $A, lines: $L, spacing_um: {depth: 4.0, ascan: 12.0, line: 24.0}}
methods: [cfd]
window: {type: hann}
freq_cutoff: 4
enface: {start: 10, step: 20, count: 4}
xsec: {h_index: 5, v_index: 10}
scale: log
display:
  bscan: {gsc: 1.0, contrast: 2, brightness: -60}
  enface: {gsc: 1.0, contrast: 2, brightness: -60}
  confocal: {gsc: 0.25, contrast: 2, brightness: -60}
products: [enface, confocal, xsec_h, xsec_v]
EOF
cat >"$T/octd.ini" <<EOF
[engine]
backend = cpu
threads = 1
[ring]
frames = $N-frames
control = $N-control
status = $N-status
[publish]
endpoint = ipc://$T/pub
[profile]
path = $T/profile.yaml
[save]
directory = $T
EOF
"$BIN/octsim" --ring "$N-frames" --samples $M --ascans $A --lines $L --rate $((A * L * 10)) \
    >"$T/octsim.log" 2>&1 &
PIDS+=($!)
"$BIN/octd" --config "$T/octd.ini" >"$T/octd.log" 2>&1 &
OCTD=$!
CTL=("$BIN/octctl" --control "$N-control" --status "$N-status" --timeout 5)
wait_for 15 '"${CTL[@]}" status 2>/dev/null | grep -q "^state=online"' || fail "octd did not come online"
PORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN/octweb" --listen 127.0.0.1:$PORT --endpoint "ipc://$T/pub" --control "$N-control" \
    --status "$N-status" --operator-token-file "$T/op.token" --viewer-token-file "$T/view.token" \
    >"$T/octweb.log" 2>&1 &
PIDS+=($!)
WEB=$!
wait_for 10 "\"$PYTHON\" -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:$PORT/\")' 2>/dev/null" ||
    fail "octweb does not serve its page"
# the image headers carry the profile's spacing; a foreign Origin is refused
"$PYTHON" - "$PORT" <<'EOF' || fail "a WebSocket with a foreign Origin was accepted"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"GET /ws?token=operator-token-0123456789abcdef HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n"
          b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Version: 13\r\nOrigin: http://evil.example\r\n\r\n" % sys.argv[1].encode())
r = s.recv(200)
sys.exit(0 if not r.startswith(b"HTTP/1.1 101") else 1)
EOF
echo "ok   a WebSocket from a foreign Origin is refused"

# TLS through civetweb (a self-signed certificate): the page and a WebSocket
# whose first message is the hello of an operator
if command -v openssl >/dev/null; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/cert.pem" -days 2 \
        -subj /CN=127.0.0.1 >/dev/null 2>&1 || fail "openssl cannot make a certificate"
    cat "$T/cert.pem" "$T/key.pem" >"$T/octweb.pem"
    chmod 600 "$T/octweb.pem"
    TPORT=$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$BIN/octweb" --listen 127.0.0.1:${TPORT}s --cert "$T/octweb.pem" --endpoint "ipc://$T/pub" \
        --control "$N-control" --status "$N-status" --operator-token-file "$T/op.token" \
        >"$T/octweb-tls.log" 2>&1 &
    PIDS+=($!)
    E2E_LOGS+=("$T/octweb-tls.log")
    "$PYTHON" - "$TPORT" <<'EOF2' || fail "TLS: page or WebSocket over https failed"
import socket, ssl, sys, time
port = int(sys.argv[1])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
def conn():
    for _ in range(100):
        try:
            return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            time.sleep(0.1)
    sys.exit("cannot connect")
s = conn()
s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
page = b""
while (b := s.recv(65536)):
    page += b
assert page.startswith(b"HTTP/1.1 200") and b"console.js" in page, page[:200]
s = conn()
origin = b"https://127.0.0.1:%d" % port
s.sendall(b"GET /ws?token=operator-token-0123456789abcdef HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
          b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Version: 13\r\nOrigin: %s\r\n\r\n" % (port, origin))
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, rest = buf.split(b"\r\n\r\n", 1)
assert head.startswith(b"HTTP/1.1 101"), head
while len(rest) < 4:
    rest += s.recv(4096)
n = rest[1] & 0x7f
assert rest[0] & 0x0f == 1, "first frame is not text"
assert n == 126 or n == 127, "hello too short"
text = rest
while b"operator" not in text and len(text) < 200000:
    text += s.recv(65536)
assert b'"type":"hello"' in text and b'"role":"operator"' in text, text[:200]
EOF2
    echo "ok   TLS (civetweb + octweb-tls.so): https page and an operator WebSocket"
else
    echo "SKIP (part): no openssl to make a certificate for the TLS check"
fi

OCTCTL_JSON=$("$PYTHON" -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${CTL[@]}")
URL=http://127.0.0.1:$PORT OP_TOKEN=operator-token-0123456789abcdef \
    VIEWER_TOKEN=viewer-token-0123456789abcdef OCTCTL="$OCTCTL_JSON" ART="$ART" CHROMIUM="$CHROMIUM" \
    NODE_PATH="$NODE_DIR/node_modules" timeout 120 node tests/web/e2e_web.js
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "browser test (exit $rc)"
alive || fail "octd died"
kill -0 $WEB 2>/dev/null || fail "octweb died"
# octd restarts (new blocks, new publisher): octweb re-attaches by itself
kill "$OCTD"
wait "$OCTD" 2>/dev/null
"$BIN/octd" --config "$T/octd.ini" >>"$T/octd.log" 2>&1 &
OCTD=$!
"$PYTHON" tests/web/wsprobe.py "$PORT" operator-token-0123456789abcdef "$OCTD" 20 ||
    fail "octweb did not re-attach to a restarted octd"
echo "ok   octd restarted: octweb re-attached (health of the new pid, values, images downscaled for a small view)"
kill $WEB
wait_for 5 '! kill -0 $WEB 2>/dev/null' || fail "octweb did not stop on SIGTERM"
wait $WEB 2>/dev/null
PIDS=("${PIDS[@]/#$WEB}")
echo "PASS e2e_web"
