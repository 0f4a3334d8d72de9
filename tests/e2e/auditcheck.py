"""
Assertions on the audit rows (docs/audit.md) the gateway writes for what an
end-to-end test provoked: a test states, for each allow or deny, how to find
its row (e.g. client addr:port and path) and what every column must hold;
check() waits for the asynchronous writer once and reports every mismatch.
"""

import os
import re
import time

import sgtest as T

# Every expectation names these columns (the value, ANY, or a matcher).
COLUMNS = ("decision", "kind", "sandbox", "client", "host", "ip", "port",
           "method", "path", "status", "rule", "reason", "credential",
           "bytes_up", "bytes_down")

def _vocabulary():
    """The reason words of src/core/reason.c's table: the one vocabulary."""
    src = os.environ.get("SANDGATE_SRC") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(src, "src", "core", "reason.c")) as f:
        words = set(re.findall(r'\[REASON_[A-Z_]+\]\s*=\s*\{\s*"([a-z-]+)"',
            f.read()))
    if len(words) < 30:
        raise RuntimeError("cannot read the reasons from reason.c")
    return words


REASONS = _vocabulary()

_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class Matcher:
    """A column expectation that is not a single value."""

    def __init__(self, desc, fn):
        self.desc = desc
        self.fn = fn

    def __call__(self, v):
        try:
            return bool(self.fn(v))
        except TypeError:
            return False

    def __repr__(self):
        return self.desc


ANY = Matcher("anything", lambda v: True)


def one_of(*vals):
    return Matcher("one of %r" % (vals,), lambda v: any(
        type(v) is type(x) and v == x for x in vals))


def at_least(n):
    return Matcher("an integer >= %d" % n,
                   lambda v: type(v) is int and v >= n)


def between(lo, hi):
    return Matcher("an integer in [%d, %d]" % (lo, hi),
                   lambda v: type(v) is int and lo <= v <= hi)


def regex(rx):
    c = re.compile(rx)
    return Matcher("text matching /%s/" % rx,
                   lambda v: isinstance(v, str) and c.fullmatch(v) is not None)


LOOPBACK_CLIENT = regex(r"127\.0\.0\.1:[1-9][0-9]{0,4}")


def _same(want, got):
    if isinstance(want, Matcher):
        return want(got)
    # 200 is not "200", and None is not 0.
    return type(want) is type(got) and want == got


def client_of_sock(sock):
    addr = sock.getsockname()
    return "%s:%d" % (addr[0], addr[1])


def client_of_conn(conn):
    return client_of_sock(conn.sock)


def client_of_curl(r):
    """The addr:port curl used towards the proxy (from -w %{json})."""
    ip, port = r.info.get("local_ip"), r.info.get("local_port")
    if not ip or not port:
        raise AssertionError("curl reported no local address: %r" % (r,))
    return "%s:%d" % (ip, port)


def raw_request(port, data, method="GET", source=None, timeout=10):
    """T.raw_request that also returns the client address the gateway saw."""
    c = T.Conn(port, source=source, timeout=timeout)
    try:
        client = client_of_conn(c)
        c.send(data)
        try:
            return c.read_response(method), client
        except (EOFError, ConnectionResetError):
            return None, client
    finally:
        c.close()


class _Expect:
    def __init__(self, label, where, want, count, after):
        self.label = label
        self.where = where
        self.want = want
        self.count = count
        self.after = after

    def matches(self, row):
        if self.after is not None and row["id"] <= self.after:
            return False
        return all(_same(v, row.get(k)) for k, v in self.where.items())


def _short(v):
    """repr of v, long strings cut so a report stays readable."""
    if isinstance(v, str) and len(v) > 120:
        return "%r...(%d chars)" % (v[:60], len(v))
    return repr(v)


def _fmt(row):
    keys = ("id",) + COLUMNS + ("duration_ms",)
    return "{" + ", ".join("%s=%s" % (k, _short(row.get(k))) for k in keys) + "}"


class Audit:
    """Expectations on one gateway's audit rows, checked together."""

    def __init__(self, tc, gw, timeout=5.0):
        self.tc = tc
        self.gw = gw
        self.timeout = timeout
        self.pending = []

    def mark(self):
        """The newest row id now: expect(after=...) then ignores older rows."""
        rows = self.gw.audit_rows()
        return rows[-1]["id"] if rows else 0

    def expect(self, where, label=None, count=1, after=None, **want):
        """
        count rows match where (column == value, or a Matcher) and have an
        id above after; each must hold want. where and want together name
        every column of COLUMNS; duration_ms is optional (default: >= 0).
        """
        both = dict(want)
        for k, v in where.items():
            if k in want:
                raise ValueError("%s both in where and in want" % k)
            both[k] = v
        missing = [c for c in COLUMNS if c not in both]
        if missing:
            raise ValueError("expectation names no %s" % ", ".join(missing))
        both.setdefault("duration_ms", at_least(0))
        label = label or ", ".join("%s=%r" % kv for kv in where.items())
        self.pending.append(_Expect(label, dict(where), both, count, after))

    def _problems(self, e, rows):
        out = []
        for r in rows:
            diffs = ["%s: want %s, got %s" % (k, _short(v), _short(r.get(k)))
                     for k, v in e.want.items() if not _same(v, r.get(k))]
            if r.get("reason") is not None and r["reason"] not in REASONS and \
                    _same(e.want["reason"], r["reason"]):
                diffs.append("reason %r is not in the vocabulary" % r["reason"])
            if not isinstance(r.get("ts"), str) or not _TS.match(r["ts"]):
                diffs.append("ts %r is not RFC 3339 UTC with ms" % r.get("ts"))
            for k in ("country", "asn"):   # no geoip database configured
                if r.get(k) is not None:
                    diffs.append("%s: want None, got %r" % (k, r.get(k)))
            for k in ("hash", "prev_hash"):
                if not isinstance(r.get(k), str) or not _HEX64.match(r[k]):
                    diffs.append("%s %r is not 64 hex digits" % (k, r.get(k)))
            if diffs:
                out.append("  row %s\n    %s" % (_fmt(r), "\n    ".join(diffs)))
        return out

    def check(self):
        """Wait (once, for all) until every expectation has its rows; fail on any mismatch."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        deadline = time.time() + self.timeout * T.SLOW
        while True:
            rows = self.gw.audit_rows()
            found = [[r for r in rows if e.matches(r)] for e in pending]
            if all(len(f) >= e.count for e, f in zip(pending, found)) or \
                    time.time() > deadline:
                break
            time.sleep(0.05)
        report = []
        for e, f in zip(pending, found):
            probs = []
            if len(f) != e.count:
                probs.append("  %d rows match, expected %d" % (len(f), e.count))
                if not f:
                    probs.append("  newest rows: " + "\n    ".join(
                        [""] + [_fmt(r) for r in rows[-4:]]))
            probs += self._problems(e, f)
            if probs:
                report.append("audit row for [%s]:\n%s" % (e.label, "\n".join(probs)))
        if report:
            self.tc.fail("\n".join(report))
        return found
