"""wsprobe.py PORT TOKEN PID [SECONDS] - a minimal WebSocket client of octweb
(tests/e2e_web.sh): waits until octweb's health names octd's PID with its
control block attached, the values arrive and an en-face image arrives
downscaled for a 16 x 16 view (q = 1); exit 0,
else 1 with what was missing.  (RFC 6455 by hand: masked client frames,
server frames unmasked.)"""
import json, os, socket, struct, sys, time

port, token, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
limit = time.time() + (float(sys.argv[4]) if len(sys.argv) > 4 else 15)
s = socket.create_connection(("127.0.0.1", port), timeout=2)
s.sendall(("GET /ws?token=%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           "Sec-WebSocket-Version: 13\r\nOrigin: http://127.0.0.1:%d\r\n\r\n" % (token, port, port)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
head, buf = buf.split(b"\r\n\r\n", 1)
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit("handshake: %r" % head[:80])


def send(text):
    data, mask = text.encode(), os.urandom(4)
    hdr = bytes([0x81, 0x80 | len(data)]) if len(data) < 126 else bytes([0x81, 0xFE]) + struct.pack(">H", len(data))
    s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def frame():
    global buf
    while True:
        if len(buf) >= 2:
            n, off = buf[1] & 0x7F, 2
            if n == 126 and len(buf) >= 4:
                n, off = struct.unpack(">H", buf[2:4])[0], 4
            elif n == 127 and len(buf) >= 10:
                n, off = struct.unpack(">Q", buf[2:10])[0], 10
            if n < 126 or off > 2:
                if len(buf) >= off + n:
                    op, data, buf = buf[0] & 0x0F, buf[off:off + n], buf[off + n:]
                    return op, data
        try:
            buf += s.recv(1 << 16)
        except socket.timeout:
            if time.time() > limit:
                return None, None


got = {"health": False, "values": False, "image": False}
# a 16 x 16 view of the 32 x 64 en-face images: octweb box-averages them
# by 2 x 4 before sending (it saves bandwidth); the payload is that size
send("view\t0\tenface/cfd\t16\t16\t1")
while time.time() < limit and not all(got.values()):
    op, data = frame()
    if op == 1:
        m = json.loads(data)
        if m["type"] == "health" and m.get("pid") == pid and m.get("control") and m.get("state") == "online":
            got["health"] = True
        if m["type"] == "values":
            got["values"] = True
    elif op == 2:
        hl = struct.unpack("<I", data[:4])[0]
        h = json.loads(data[4:4 + hl])
        px = len(data) - 4 - hl
        L, A = h["h"]["shape"][1], h["h"]["shape"][2]
        want = (h["fy"], h["fx"], h["rows"], h["cols"], h["q"]) == (L // 16, A // 16, 16, 16, 1)
        if not want or px != h["rows"] * h["cols"]:
            sys.exit("image: shape %s sent as %dx%d /%d,%d q %d, %d bytes" % (
                h["h"]["shape"], h["rows"], h["cols"], h["fy"], h["fx"], h["q"], px))
        got["image"] = True
        send("ack\t0")
missing = [k for k, v in got.items() if not v]
sys.exit("missing: %s" % ", ".join(missing) if missing else 0)
