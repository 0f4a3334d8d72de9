"""
DNS packets by hand and a scripted resolver, for the tests that need an
upstream answering what a case needs (hostile records, odd sizes, loops):
test_dnsup_probe.py, test_socks_probe.py and the other DNS probes.
Loopback only.
"""

import socket
import struct
import threading
import time

import sgtest as T

A, NS, CNAME, SOA, TXT, AAAA, SRV, OPT, HTTPS = 1, 2, 5, 6, 16, 28, 33, 41, 65


# ------------------------------------------------------------ packets

def enc_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        if label:
            b = label.encode("latin-1")
            out += bytes([len(b)]) + b
    return out + b"\0"


def rr(owner, rtype, rdata, ttl=60, rclass=1):
    if rtype == A:
        rdata = socket.inet_pton(socket.AF_INET, rdata)
    elif rtype == AAAA:
        rdata = socket.inet_pton(socket.AF_INET6, rdata)
    elif rtype == CNAME:
        rdata = enc_name(rdata)
    return (enc_name(owner) + struct.pack(">HHIH", rtype, rclass, ttl,
            len(rdata)) + rdata)


def txt(text):
    """One character-string (at most 255 bytes)."""
    return bytes([len(text)]) + text


def txt_rdata(text):
    """TXT rdata of any length, in strings of 255."""
    out = b""
    while text:
        chunk, text = text[:255], text[255:]
        out += bytes([len(chunk)]) + chunk
    return out


def v4s(*addrs):
    return b"".join(socket.inet_pton(socket.AF_INET, a) for a in addrs)


def v6s(*addrs):
    return b"".join(socket.inet_pton(socket.AF_INET6, a) for a in addrs)


def enc_labels(labels):
    """A wire name from raw label bytes (so a label may hold a '.')."""
    return b"".join(bytes([len(lb)]) + lb for lb in labels) + b"\0"


def opt_rr(size=1232, options=b"", flags=0):
    return (b"\0" + struct.pack(">HHIH", OPT, size, flags, len(options)) +
            options)


def build_query(name, qtype, qid=0x4242, edns=None, flags=0x0100,
                qdcount=1, raw_qname=None, options=b"", qclass=1):
    """A query; raw_qname: the question's name as wire bytes instead."""
    ar = 1 if edns is not None else 0
    q = struct.pack(">HHHHHH", qid, flags, qdcount, 0, 0, ar)
    q += (raw_qname if raw_qname is not None else enc_name(name))
    q += struct.pack(">HH", qtype, qclass)
    if edns is not None:
        q += opt_rr(edns, options)
    return q


def skip_name(buf, off):
    while True:
        n = buf[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def read_name(buf, off):
    labels, hops = [], 0
    while True:
        n = buf[off]
        if n == 0:
            return ".".join(labels)
        if n & 0xC0 == 0xC0:
            off = struct.unpack(">H", buf[off:off + 2])[0] & 0x3FFF
            hops += 1
            if hops > 40:
                raise ValueError("loop")
            continue
        labels.append(buf[off + 1:off + 1 + n].decode("latin-1"))
        off += 1 + n


def parse(buf):
    """(header dict, question name as sent, [(section, owner, type, data,
    ttl)]): A and AAAA data as text, CNAME as a name, the rest as bytes;
    the header dict also has the length and an OPT's size and data."""
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", buf[:12])
    h = {"id": qid, "flags": flags, "rcode": flags & 0xF,
         "tc": bool(flags & 0x200), "aa": bool(flags & 0x400),
         "rd": bool(flags & 0x100), "ra": bool(flags & 0x80),
         "qd": qd, "an": an, "ns": ns, "ar": ar, "len": len(buf)}
    off, qname = 12, None
    for _ in range(qd):
        qname = read_name(buf, off)
        off = skip_name(buf, off) + 4
    recs = []
    for sec, cnt in (("an", an), ("ns", ns), ("ar", ar)):
        for _ in range(cnt):
            owner = read_name(buf, off)
            off = skip_name(buf, off)
            t, c, ttl, ln = struct.unpack(">HHIH", buf[off:off + 10])
            off += 10
            data = buf[off:off + ln]
            off += ln
            if t == A and ln == 4:
                data = socket.inet_ntop(socket.AF_INET, data)
            elif t == AAAA and ln == 16:
                data = socket.inet_ntop(socket.AF_INET6, data)
            elif t == CNAME:
                data = read_name(buf, off - ln)
            elif t == OPT:
                h["opt_size"] = c
                h["opt_data"] = data
            recs.append((sec, owner.lower(), t, data, ttl))
    return h, qname, recs


# ------------------------------------------------------------ resolver

class Upstream:
    """
    A scripted resolver on 127.0.0.1 (UDP and TCP). zone: {lower-case name:
    {qtype: entry}}, an entry one of
      (answers, additional)                 records, rcode 0
      (answers, authority, additional[, rcode])
      a callable (query bytes, qid, question section, count[, tcp]) ->
      the whole response bytes, None (no answer) or (delay s, bytes)
      (count: how often this name and type were asked; tcp passed when
      tcp_arg).
    suffixes: {suffix: {qtype: entry}} for the names under it. A name
    absent is NXDOMAIN, a type absent NODATA; the question is echoed as
    sent; the zone key "always_opt" adds an OPT whether or not asked.
    Over UDP an answer longer than the client's size (512, or its EDNS size)
    goes with TC and no records, as servers do. opt_size: the size our OPT
    announces (None: never an OPT); ra: whether answers carry RA. Every
    query is kept: .asked (name, qtype), .raw (name, qtype, tcp, bytes).
    """

    def __init__(self, zone, opt_size=4000, ra=True, suffixes=None,
                 tcp_arg=False):
        self.zone = zone
        self.suffixes = suffixes or {}
        self.opt_size = opt_size
        self.ra = ra
        self.tcp_arg = tcp_arg
        self.count = {}
        self.lock = threading.Lock()
        self.host = "127.0.0.1"
        self.port = T.free_port(self.host, udp_too=True)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((self.host, self.port))
        self.udp.settimeout(0.2)
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((self.host, self.port))
        self.tcp.listen(16)
        self.tcp.settimeout(0.2)
        self.stopping = False
        self.asked = []
        self.raw = []
        for f in (self._udp_loop, self._tcp_loop):
            threading.Thread(target=f, daemon=True).start()

    @property
    def addr(self):
        return "%s:%d" % (self.host, self.port)

    def queries(self, name, qtype=None):
        with self.lock:
            return [r for r in self.raw if r[0] == name and
                    (qtype is None or r[1] == qtype)]

    def lookup(self, name):
        if name in self.zone:
            return self.zone[name]
        for suf, z in self.suffixes.items():
            if name.endswith("." + suf):
                return z
        return None

    def answer(self, q, limit):
        qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", q[:12])
        qend = skip_name(q, 12) + 4
        qsec = q[12:qend]
        name = read_name(q, 12).lower()
        qtype = struct.unpack(">H", q[qend - 4:qend - 2])[0]
        tcp = limit is None
        with self.lock:
            self.asked.append((name, qtype))
            self.raw.append((name, qtype, tcp, q))
            k = (name, qtype)
            self.count[k] = self.count.get(k, 0) + 1
            n = self.count[k]
        edns = None
        if ar and q[qend] == 0 and struct.unpack(
                ">H", q[qend + 1:qend + 3])[0] == OPT:
            edns = struct.unpack(">H", q[qend + 3:qend + 5])[0]
        rflags = 0x8000 | (flags & 0x0100) | 0x0400   # QR, RD copied, AA
        if self.ra:
            rflags |= 0x0080
        entry = None
        z = self.lookup(name)
        if name == "ready.sgtest.test":
            entry = ([rr(name, A, "127.0.0.1")] if qtype == A else [], [])
        elif z is not None:
            entry = z.get(qtype, ([], []))
        if callable(entry):
            if self.tcp_arg:
                return entry(q, qid, qsec, n, tcp)
            return entry(q, qid, qsec, n)
        if entry is None:
            ans, auth, add, rcode = [], [], [], 3
        elif len(entry) == 2:
            (ans, add), auth, rcode = entry, [], 0
        else:
            ans, auth, add = entry[:3]
            rcode = entry[3] if len(entry) > 3 else 0
        opt = []
        if self.opt_size is not None and (
                edns or (z is not None and z.get("always_opt"))):
            opt = [opt_rr(self.opt_size)]
        out = (struct.pack(">HHHHHH", qid, rflags | rcode, 1, len(ans),
               len(auth), len(add) + len(opt)) + qsec + b"".join(ans) +
               b"".join(auth) + b"".join(add) + b"".join(opt))
        if limit is not None and len(out) > max(limit, edns or limit):
            out = (struct.pack(">HHHHHH", qid, rflags | 0x200, 1, 0, 0,
                   len(opt)) + qsec + b"".join(opt))
        return out

    def _udp_send(self, r, peer):
        try:
            self.udp.sendto(r, peer)
        except OSError:
            pass

    def _udp_loop(self):
        while not self.stopping:
            try:
                q, peer = self.udp.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                r = self.answer(q, 512)
                if isinstance(r, tuple):     # (delay, bytes): answer later
                    threading.Timer(r[0], self._udp_send,
                                    (r[1], peer)).start()
                elif r:
                    self._udp_send(r, peer)
            except Exception:
                pass

    def _tcp_loop(self):
        while not self.stopping:
            try:
                c, _ = self.tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._tcp_serve, args=(c,),
                             daemon=True).start()

    def _tcp_serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while True:
                while len(buf) >= 2 and len(buf) >= 2 + struct.unpack(
                        ">H", buf[:2])[0]:
                    n = struct.unpack(">H", buf[:2])[0]
                    q, buf = buf[2:2 + n], buf[2 + n:]
                    r = self.answer(q, None)
                    if isinstance(r, tuple):
                        time.sleep(r[0])
                        r = r[1]
                    if r:
                        c.sendall(struct.pack(">H", len(r)) + r)
                b = c.recv(65536)
                if not b:
                    return
                buf += b
        except Exception:
            pass
        finally:
            c.close()

    def stop(self):
        self.stopping = True
        for s in (self.udp, self.tcp):
            try:
                s.close()
            except OSError:
                pass
