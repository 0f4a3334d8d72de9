#!/usr/bin/python3
"""
A guest for ingress tests, run inside a sandbox (stdlib only):
  guest_server.py HTTP_PORT WS_PORT
HTTP_PORT answers every request with a JSON body describing the request it
received (method, target, headers, body length), so that a test can see what
reached the guest; WS_PORT is a WebSocket echo (RFC 6455, text and binary,
ping -> pong, close). Both listen on 0.0.0.0. Prints "ready" when both listen.
Its framing is tests/e2e/wsframe.py, which the test copies next to it (the
sandbox sees its workspace, not the source tree).
"""

import json
import socket
import sys
import threading

sys.dont_write_bytecode = True  # the workspace stays as the test made it
import wsframe as W  # noqa: E402  (copied next to this file)


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


def ws_conn(c):
    try:
        lines, buf = read_head(c)
        if lines is None:
            return
        key = dict((k.lower(), v) for k, v in headers_of(lines)).get(
            "sec-websocket-key", "")
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " +
            W.accept_key(key).encode() + b"\r\n\r\n")
        rd = W.Reader(c, buf)
        while True:
            f = W.read_frame(rd.read_exact)
            if f.opcode == W.OP_CLOSE:
                c.sendall(W.encode_frame(W.OP_CLOSE, b""))
                return
            reply = W.OP_PONG if f.opcode == W.OP_PING else f.opcode
            c.sendall(W.encode_frame(reply, f.payload))
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
