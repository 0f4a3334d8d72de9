"""
WebSocket framing (RFC 6455) for the end-to-end tests' clients and origins:
the handshake's accept key, frames built (masked or not) and read back, from
a socket or from bytes already received. Standard library only, no state:
besides the tests in tests/e2e it is imported by data/big_origins.py (a
process of its own, which puts tests/e2e on its path) and by
data/guest_server.py (test_sandbox_ingress.py copies this file next to it
into the sandbox's workspace).
"""

import base64
import collections
import hashlib
import os
import struct

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10

# One frame as read: fin (bool), opcode, rsv (the three RSV bits as a
# number), payload (unmasked), masked (whether the sender masked it).
Frame = collections.namedtuple("Frame", "fin opcode rsv payload masked")


def accept_key(key):
    """Sec-WebSocket-Accept (str) for a Sec-WebSocket-Key (str or bytes)."""
    if isinstance(key, bytes):
        key = key.decode("latin-1")
    return base64.b64encode(
        hashlib.sha1((key + GUID).encode()).digest()).decode()


def xor_mask(data, mask):
    """data XOR the 4-byte mask repeated (RFC 6455 5.3), as big integers
    (fast for megabytes too)."""
    n = len(data)
    if n == 0:
        return b""
    m = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^
            int.from_bytes(m, "little")).to_bytes(n, "little")


def encode_frame(op, payload, fin=True, mask=None):
    """One frame; masked (as a client sends it) when mask is 4 bytes."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | op
    mbit = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("!BB", b0, mbit | n)
    elif n < 65536:
        head = struct.pack("!BBH", b0, mbit | 126, n)
    else:
        head = struct.pack("!BBQ", b0, mbit | 127, n)
    if mask:
        return head + mask + xor_mask(payload, mask)
    return head + bytes(payload)


def client_frame(op, payload, fin=True):
    """One frame as a client sends it: masked with a fresh random key."""
    return encode_frame(op, payload, fin=fin, mask=os.urandom(4))


def read_frame(read_exact, max_len=None):
    """
    The next Frame from read_exact(n) (a function returning exactly n bytes,
    or raising). A payload longer than max_len (when given) raises
    ValueError before it is read.
    """
    b0, b1 = read_exact(2)
    n = b1 & 0x7f
    if n == 126:
        n = struct.unpack("!H", read_exact(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", read_exact(8))[0]
    if max_len is not None and n > max_len:
        raise ValueError("frame too large")
    mask = read_exact(4) if b1 & 0x80 else None
    p = read_exact(n)
    if mask:
        p = xor_mask(p, mask)
    return Frame(bool(b0 & 0x80), b0 & 0x0f, (b0 >> 4) & 7, p,
                 mask is not None)


def decode_frame(buf):
    """(Frame, bytes it took) of a whole frame at the start of buf, or None
    while buf holds only part of one."""
    pos = [0]

    def take(n):
        if pos[0] + n > len(buf):
            raise _Short()
        out = bytes(buf[pos[0]:pos[0] + n])
        pos[0] += n
        return out

    try:
        f = read_frame(take)
    except _Short:
        return None
    return f, pos[0]


class _Short(Exception):
    pass


class Reader:
    """
    read_exact() and read_until() over a socket, keeping what was received
    past them; buf: bytes already received (e.g. after a request head).
    Raises EOFError when the peer closes first.
    """

    def __init__(self, sock, buf=b"", bufsize=65536):
        self.sock = sock
        self.buf = bytearray(buf)
        self.bufsize = bufsize

    def _fill(self):
        b = self.sock.recv(self.bufsize)
        if not b:
            raise EOFError("connection closed")
        self.buf += b

    def read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_until(self, sep):
        """Up to and with the first sep."""
        while sep not in self.buf:
            self._fill()
        return self.read_exact(self.buf.index(sep) + len(sep))
