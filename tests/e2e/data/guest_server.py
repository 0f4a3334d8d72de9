#!/usr/bin/python3
"""
A guest for ingress tests, run inside a sandbox (stdlib only):
  guest_server.py HTTP_PORT WS_PORT
HTTP_PORT answers every request with a JSON body describing the request it
received (method, target, headers, body length), so that a test can see what
reached the guest; WS_PORT is a WebSocket echo (RFC 6455, text and binary,
ping -> pong, close). Both listen on 0.0.0.0. Prints "ready" when both listen.
"""

import base64
import hashlib
import json
import socket
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            return None, b""
        buf += d
        if len(buf) > 65536:
            return None, b""
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1").split("\r\n"), rest


def headers_of(lines):
    out = []
    for line in lines[1:]:
        k, _, v = line.partition(":")
        out.append([k.strip(), v.strip()])
    return out


def http_conn(c):
    try:
        while True:
            lines, rest = read_head(c)
            if lines is None:
                return
            method, target, _ = lines[0].split(" ", 2)
            hs = headers_of(lines)
            n = 0
            for k, v in hs:
                if k.lower() == "content-length":
                    n = int(v)
            body = rest
            while len(body) < n:
                d = c.recv(65536)
                if not d:
                    return
                body += d
            out = json.dumps({"method": method, "target": target,
                "headers": hs, "body_len": len(body)}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n" % len(out) + out)
    except OSError:
        pass
    finally:
        c.close()


def recv_exact(c, n, buf):
    while len(buf) < n:
        d = c.recv(65536)
        if not d:
            raise EOFError
        buf += d
    return buf[:n], buf[n:]


def ws_conn(c):
    try:
        lines, buf = read_head(c)
        if lines is None:
            return
        key = dict((k.lower(), v) for k, v in headers_of(lines)).get(
            "sec-websocket-key", "")
        acc = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc +
            b"\r\n\r\n")
        while True:
            h, buf = recv_exact(c, 2, buf)
            op, ln = h[0] & 0x0f, h[1] & 0x7f
            if ln == 126:
                x, buf = recv_exact(c, 2, buf)
                ln = struct.unpack("!H", x)[0]
            elif ln == 127:
                x, buf = recv_exact(c, 8, buf)
                ln = struct.unpack("!Q", x)[0]
            mask = b""
            if h[1] & 0x80:
                mask, buf = recv_exact(c, 4, buf)
            data, buf = recv_exact(c, ln, buf)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if op == 8:
                c.sendall(b"\x88\x00")
                return
            reply = 0x0a if op == 9 else op
            if len(data) < 126:
                hdr = bytes([0x80 | reply, len(data)])
            else:
                hdr = bytes([0x80 | reply, 126]) + struct.pack("!H", len(data))
            c.sendall(hdr + data)
    except (OSError, EOFError):
        pass
    finally:
        c.close()


def serve(port, fn):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=fn, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()


def main():
    serve(int(sys.argv[1]), http_conn)
    serve(int(sys.argv[2]), ws_conn)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
