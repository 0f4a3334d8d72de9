#!/usr/bin/python3
"""
Probes of approval.notify and the operator's answer path (docs/approvals.md
"Notification", "Answering"; docs/config.md "approval"), as a sandbox that
controls the names and ports that become questions.

Found, and fixed (the tests failed on the binary they were written against):
- a burst of questions is queued, not dropped: the network process send()s
  each question on a SOCK_SEQPACKET socketpair with MSG_DONTWAIT, and the
  kernel's send buffer keeps ~280 of them (1000 DNS names in a burst: 279
  queued, 90 "not told"); the notifier then runs the command for each in
  turn, long after the question expired -- with the 10 s bound per command
  one sandbox's burst keeps the notifier busy for ~45 minutes with dead
  questions, and the operator's bot asks about questions that no longer
  exist while every new question waits behind them
  (test_burst_not_queued_past_expiry);
- the 10 s bound is per system call, not per question, for an https://
  webhook: a webhook (or anything between) that answers its TLS handshake
  in small pieces a few seconds apart holds the notifier for 40 s and more
  on one question; the next question's POST waits behind it
  (test_slow_tls_webhook_bounded);
- the 10 s kill reaches the command's pid only: a command that is a script
  (a bot's wrapper running curl) leaves its children running, orphaned, as
  the `user`, one more per question that hangs
  (test_command_killed_after_10s_with_its_children);
- `sandgate approve ID --always` on a question for an IP address writes a
  `host:` rule, which the reload refuses (an IP is a cidr:): the CLI exits
  1 and nothing is approved (test_always_ip_destination; fails closed).

What held:
- DNS names with '"', '\\', ESC, 0xff 0xfe, NUL or a '.' inside a label are
  refused invalid-host before any question: nothing reaches the notifier,
  the approvals list or `sandgate approvals` (no JSON or terminal
  injection); upper case is folded (UPPER.test asks as upper.test); the
  notifier's stdin is one JSON object with the documented keys and the
  command gets exactly its configured argv (test_hostile_names_...);
- the notifier command runs as the `user`, with stdin the question and no
  fds beyond stdin/stdout/stderr (stdout/stderr are the gateway's log);
- a command still running after 10 s is killed and logged, and the next
  question is notified (first half of test_command_killed_after_10s_...);
- a SOCKS5 name that is a homograph (Cyrillic a in "paypal") is asked
  as its A-label (xn--...), the `sandgate approvals` table is ASCII;
- a SOCKS5 CONNECT request pipelined behind a held one is not carried by
  the first one's answer: after approval its bytes are the tunnel's
  payload (refused protocol-not-allowed), never a second destination;
- an answer --for with a `host:port` scope covers that port only: the same
  host on another port is a new question (and times out); a host:port
  scope for another port is refused 400; the rows: ASK per question, the
  APPROVE row with for=3600s&scope=host:port, the held request
  approval:1, the one the --for answer let through `approval` (no id),
  the other port's approval-timeout under its own question
  (test_hostport_scope_is_that_port);
- (by reading src/daemon/approval_notify.c post()) a 3xx from the webhook
  is not followed (logged as a failed POST); a huge answer body is not read
  (512 bytes, then close); the socket buffer bounds the notifier's queue,
  so memory does not grow with questions.
"""

import concurrent.futures
import json
import os
import socket
import ssl
import struct
import sys
import threading
import time
import http.server
import unittest

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtest as T  # noqa: E402


admin = T.admin


def dns_raw(labels, qid):
    hdr = struct.pack(">HHHHHH", qid & 0xffff, 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(l)]) + l for l in labels)
    return hdr + body + b"\0" + struct.pack(">HH", 1, 1)


def dns_query(name, qid):
    return dns_raw([l.encode() for l in name.split(".")], qid)


POLICY = ("sandboxes:\n"
          "  - id: agent\n"
          "    policy: asking\n"
          "    source: [127.0.0.1/32]\n"
          "policies:\n"
          "  - name: asking\n"
          "    mode: ask\n"
          "    allow:\n"
          "      - host: ok.test\n")


class _Base(unittest.TestCase):
    """A gateway whose DNS listener asks; the notifier a small script that
    appends "<time> <argc> <stdin>" to a log, then sleeps SLEEP."""

    SLEEP = "0"
    TIMEOUT = "10s"

    def start(self, notify=None, more=None, socks=False):
        td = T.TempDir("sgtest-notify-probe-")
        self.addCleanup(td.cleanup)
        self.d = td.path
        out = T.TempDir("sgtest-notify-probe-out-")
        self.addCleanup(out.cleanup)
        os.chmod(out.path, 0o777)
        self.out = os.path.join(out.path, "asked.log")
        script = os.path.join(out.path, "ask-bot.sh")
        with open(script, "w") as f:
            f.write('IFS= read -r q\n'
                    'echo "$(date +%%s.%%N) $# $q" >> %s\n'
                    'sleep %s\n' % (self.out, self.SLEEP))
        os.chmod(script, 0o755)
        dns = T.Dnsmasq(self.d, [("ok.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        self.sock = os.path.join(self.d, "adm.sock")
        self.dport = T.free_port(udp_too=True)
        extra = {"listen": {"admin": self.sock,
                            "dns": "127.0.0.1:%d" % self.dport},
                 "approval": {"timeout": self.TIMEOUT, "max_pending": 100,
                              "notify": notify or
                              ["/bin/sh", script, "--channel", "ops"]}}
        if socks:
            self.sport = T.free_port()
            extra["listen"]["socks5"] = "127.0.0.1:%d" % self.sport
        extra.update(more or {})
        self.gw = T.Gateway(self.d, dns, {"p.yaml": POLICY}, extra=extra)
        self.gw.start()
        self.addCleanup(self.gw.stop)
        self.gw.wait_admin(self.sock)
        self.us = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.addCleanup(self.us.close)
        self.us.bind(("127.0.0.1", 0))

    def send(self, pkt):
        self.us.sendto(pkt, ("127.0.0.1", self.dport))

    def notified(self):
        """[(time, argc, question)] the command was run with."""
        if not os.path.exists(self.out):
            return []
        res = []
        with open(self.out, "rb") as f:
            for line in f.read().decode("utf-8", "replace").splitlines():
                ts, argc, q = line.split(" ", 2)
                res.append((float(ts), int(argc), q))
        return res

    def pending(self):
        st, doc = admin(self.sock, "GET", "/v1/approvals")
        self.assertEqual(st, 200, doc)
        return doc["approvals"]

    def wait_for(self, fn, timeout=10):
        deadline = time.time() + timeout * T.SLOW
        while time.time() < deadline:
            v = fn()
            if v:
                return v
            time.sleep(0.05)
        return fn()


class NotifyNamesProbe(_Base):
    def test_hostile_names_never_reach_notifier(self):
        """approvals.md: the question is one JSON object {"id", "sandbox",
        "host", "port", "expires_in_ms", "answer"} on the command's stdin;
        the command is exec'd with its argv, no shell. A sandbox's DNS
        names with JSON or terminal metacharacters make no question."""
        self.start(socks=True)
        hostile = [[b'a"b\\c', b"test"], [b"a\x1b[31mx", b"test"],
                   [b"\xff\xfe", b"test"], [b"a.b", b"test"],
                   [b"A\x00B", b"test"], [b"x\ny", b"test"],
                   [b"$(id)", b"test"], [b"a b", b"test"]]
        for i, labels in enumerate(hostile):
            self.send(dns_raw(labels, 100 + i))
        self.send(dns_raw([b"UPPER", b"test"], 1))
        q = self.wait_for(lambda: self.notified())
        self.assertTrue(q, self.gw.log_tail())
        # A homograph (Cyrillic a) by SOCKS5 is asked as its A-label, never
        # as the name it looks like (docs/policy.md: U-labels in a SOCKS5
        # name are taken to their A-label).
        c = socket.create_connection(("127.0.0.1", self.sport), timeout=20)
        self.addCleanup(c.close)
        c.sendall(b"\x05\x01\x00")
        self.assertEqual(c.recv(2), b"\x05\x00")
        name = "p\u0430ypal.test".encode()
        c.sendall(b"\x05\x01\x00\x03" + bytes([len(name)]) + name +
                  struct.pack(">H", 443))
        self.assertTrue(self.wait_for(lambda: len(self.notified()) >= 2),
                        self.gw.log_tail())
        time.sleep(0.5 * T.SLOW)
        got = self.notified()
        self.assertEqual(len(got), 2, got)
        homo = json.loads(got[1][2])["host"]
        self.assertTrue(homo.startswith("xn--") and homo.isascii(), homo)
        _, argc, text = got[0]
        self.assertEqual(argc, 2)   # exactly [--channel, ops]
        doc = json.loads(text)
        self.assertEqual(sorted(doc), sorted(["id", "sandbox", "host", "port",
                                              "expires_in_ms", "answer"]))
        self.assertEqual((doc["sandbox"], doc["host"], doc["port"]),
                         ("agent", "upper.test", 0))
        self.assertEqual([(x["host"], x["port"]) for x in self.pending()],
                         [("upper.test", 0), (homo, 443)])
        r = T.run_sandgate("approvals", "-c", self.gw.cfg_path)
        self.assertNotIn("\x1b", r.stdout + r.stderr)
        self.assertTrue(r.stdout.isascii(), r.stdout)
        # The questions' rows.
        rows = self.gw.wait_audit(method="ASK")
        self.assertEqual([(x["host"], x["rule"]) for x in rows][:1],
                         [("upper.test", "approval:%d" % doc["id"])])
        st, ans = admin(self.sock, "POST", "/v1/approvals/%d" % doc["id"],
                        {"answer": "deny"})
        self.assertEqual(st, 200, ans)
        rows = self.gw.wait_audit(method="DENY", kind="admin")
        self.assertEqual([(x["host"], x["decision"], x["rule"])
                          for x in rows],
                         [("upper.test", "deny", "approval:%d" % doc["id"])])


class NotifyBurstProbe(_Base):
    SLEEP = "1"
    TIMEOUT = "2s"
    N = 10

    def test_burst_not_queued_past_expiry(self):
        """approvals.md "Notification": "one question at a time, each
        bounded to 10 s ... A question the notifier cannot take at once (a
        burst) is logged, not queued."

        Sent: 10 DNS queries for 10 names at once (one sandbox, within
        approval.max_pending), approval.timeout 2s, a notifier command that
        takes 1 s. Expected: the notifier tells what it can take, the rest
        are logged ("approval.notify not told"); no command runs for a
        question after it expired. Observed: all 10 are queued in the
        socketpair's buffer and the command is run for each in turn, the
        last ~9 s after the question it announces timed out; no "not told"
        line (with 1000 names: ~280 queued)."""
        self.start()
        sent = {}
        for i in range(self.N):
            name = "burst%d.test" % i
            sent[name] = time.time()
            self.send(dns_query(name, i + 1))
        time.sleep((self.N * 1.0 + 2) * T.SLOW)
        got = self.notified()
        told = {json.loads(q)["host"]: ts for ts, _, q in got}
        log = self.gw.log_text()
        stale = []
        for name, t in sorted(sent.items()):
            ids = [x["rule"] for x in self.gw.audit_rows(host=name,
                                                          method="ASK")]
            self.assertEqual(len(ids), 1, (name, ids))
            if name in told:
                late = told[name] - (t + 2.0)
                if late > 0.5:
                    stale.append("%s told %.1f s after it expired" % (
                        name, late))
            else:
                qid = ids[0].split(":")[1]
                self.assertIn("approval %s: approval.notify not told" % qid,
                              log)
        self.assertEqual(stale, [], "questions queued and told after they "
                         "timed out; 'not told' lines: %d" %
                         log.count("not told"))


class NotifyKillProbe(_Base):
    SLEEP = "29.5"   # a child of the command's shell, marked by its argv

    def orphans(self):
        """Live `sleep 29.5` processes whose cwd is this gateway's dir."""
        res = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if f.read() != b"sleep\x0029.5\x00":
                        continue
                if os.readlink("/proc/%s/cwd" % pid).startswith(self.d):
                    res.append(int(pid))
            except OSError:
                pass
        return res

    def kill_orphans(self):
        for pid in self.orphans():
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    def test_command_killed_after_10s_with_its_children(self):
        """approvals.md: "each bounded to 10 s (a command still running
        then is killed; a failure is logged)".

        Holds: the command (/bin/sh ask-bot.sh) is killed at 10 s, logged
        "took over 10 s: killed", and the next question is told.
        Sent: a command whose script runs `sleep 29.5` (as a bot's script
        runs curl). Expected: nothing of the killed command outlives it.
        Observed: only the command's pid gets SIGKILL (run_command()'s
        kill(pid, SIGKILL)); its child sleep is orphaned to init and runs
        on as the `user` -- one more stuck process per question."""
        self.start()
        self.addCleanup(self.kill_orphans)
        self.send(dns_query("slow1.test", 1))
        self.assertTrue(self.wait_for(lambda: self.notified()))
        t0 = time.time()
        time.sleep(0.5)
        self.send(dns_query("slow2.test", 2))
        two = self.wait_for(lambda: len(self.notified()) >= 2, timeout=15)
        self.assertTrue(two, self.gw.log_tail())
        self.assertLess(self.notified()[1][0] - t0, 11.5 * T.SLOW)
        self.assertIn("took over 10 s: killed", self.gw.log_text())
        time.sleep(0.5)
        # The second command still runs (its own sleep); the first one's
        # child must be gone with it.
        left = self.orphans()
        self.assertLessEqual(len(left), 1, "the killed command's child "
                             "lives on: pids %s" % left)


class AlwaysProbe(unittest.TestCase):
    """`sandgate approve ID --always` on the questions a sandbox makes."""

    def test_always_ip_destination(self):
        """approvals.md: "`--always` ... writes an allow rule for the
        question's destination ... reloads the gateway, then approves the
        requests waiting. The rule is kept across restarts"; docs/policy.md:
        "A `host:` written as an IP address ... is an error: IP
        destinations are matched only by `cidr:` rules".

        Sent: GET http://127.0.0.2:PORT/ip (absolute form) from a sandbox
        on an asking policy; `sandgate approve 1 --always`. Expected: a
        rule the gateway takes (a cidr: 127.0.0.2/32 with the port), the
        request approved. Observed: the CLI writes `- host: "127.0.0.2"`
        (write_always() in src/cmd_approvals.c), the reload refuses it
        ("is an IP address: write IP destinations as cidr:"), the CLI
        removes it and exits 1; the request stays held until it times
        out. Fails closed, but --always never works for an IP question."""
        td = T.TempDir("sgtest-notify-always-")
        self.addCleanup(td.cleanup)
        origin = T.Origin("plain", host="127.0.0.2")
        self.addCleanup(origin.stop)
        dns = T.Dnsmasq(td.path, [("ok.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        sock = os.path.join(td.path, "adm.sock")
        pol = POLICY + "    allow_private: [127.0.0.2/32]\n"
        gw = T.Gateway(td.path, dns, {"p.yaml": pol},
                       extra={"listen": {"admin": sock},
                              "approval": {"timeout": "10s"}})
        gw.start()
        self.addCleanup(gw.stop)
        gw.wait_admin(sock)
        f = concurrent.futures.ThreadPoolExecutor(1).submit(
            T.raw_request, gw.port, ("GET http://127.0.0.2:%d/ip HTTP/1.1\r\n"
            "Host: 127.0.0.2\r\nConnection: close\r\n\r\n" %
            origin.port).encode(), timeout=30)
        q = None
        deadline = time.time() + 10 * T.SLOW
        while q is None and time.time() < deadline:
            st, doc = admin(sock, "GET", "/v1/approvals")
            q = next(iter(doc["approvals"]), None)
            time.sleep(0.05)
        self.assertIsNotNone(q)
        r = T.run_sandgate("approve", str(q["id"]), "--always", "-c",
                           gw.cfg_path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(f.result().status, 200)


class AnswerPortProbe(unittest.TestCase):
    """An answer --for with a host:port scope covers that port only; the
    rows say which question decided what."""

    def test_hostport_scope_is_that_port(self):
        """approvals.md: "`--for DURATION` also decides the sandbox's later
        requests in `--scope` (`host`: any port; `host:port`; ...)"."""
        td = T.TempDir("sgtest-notify-port-")
        self.addCleanup(td.cleanup)
        o1 = T.Origin("one", host="127.0.0.2")
        self.addCleanup(o1.stop)
        o2 = T.Origin("two", host="127.0.0.2")
        self.addCleanup(o2.stop)
        dns = T.Dnsmasq(td.path, [("port.test", "127.0.0.2")])
        self.addCleanup(dns.stop)
        sock = os.path.join(td.path, "adm.sock")
        pol = POLICY + "    allow_private: [127.0.0.2/32]\n"
        gw = T.Gateway(td.path, dns, {"p.yaml": pol},
                       extra={"listen": {"admin": sock},
                              "approval": {"timeout": "2s"}})
        gw.start()
        self.addCleanup(gw.stop)
        gw.wait_admin(sock)
        pool = concurrent.futures.ThreadPoolExecutor(2)
        self.addCleanup(pool.shutdown)

        def get(port, path):
            return pool.submit(T.raw_request, gw.port, (
                "GET http://port.test:%d%s HTTP/1.1\r\nHost: port.test\r\n"
                "Connection: close\r\n\r\n" % (port, path)).encode(),
                timeout=30)
        f = get(o1.port, "/p1")
        q = None
        deadline = time.time() + 10 * T.SLOW
        while q is None and time.time() < deadline:
            st, doc = admin(sock, "GET", "/v1/approvals")
            q = next(iter(doc["approvals"]), None)
            time.sleep(0.05)
        self.assertIsNotNone(q)
        st, doc = admin(sock, "POST", "/v1/approvals/%d" % q["id"],
                        {"answer": "approve", "for": "1h",
                         "scope": "port.test:%d" % o2.port})
        self.assertEqual(st, 400, doc)      # does not cover the question
        st, doc = admin(sock, "POST", "/v1/approvals/%d" % q["id"],
                        {"answer": "approve", "for": "1h",
                         "scope": "port.test:%d" % o1.port})
        self.assertEqual(st, 200, doc)
        self.assertEqual(f.result().status, 200)
        self.assertEqual(get(o1.port, "/p2").result().status, 200)
        r = get(o2.port, "/p3").result()
        self.assertEqual((r.status, r.header("x-sandgate-reason")),
                         (403, "approval-timeout"))
        self.assertFalse(o2.saw_path("/p3"))
        qid = "approval:%d" % q["id"]
        rows = gw.wait_audit(method="APPROVE", kind="admin")
        self.assertEqual(len(rows), 1, rows)
        self.assertEqual((rows[0]["host"], rows[0]["port"],
                          rows[0]["decision"], rows[0]["rule"]),
                         ("port.test", o1.port, "allow", qid))
        self.assertIn("scope=port.test:%d" % o1.port, rows[0]["path"])
        self.assertIn("for=3600s", rows[0]["path"])
        gw.wait_audit(host="port.test", path="/p3")
        got = {x["path"]: (x["port"], x["decision"], x["reason"], x["rule"])
               for x in gw.audit_rows(host="port.test")
               if x["method"] == "GET"}
        self.assertEqual(got["/p1"][:2], (o1.port, "allow"))
        self.assertEqual(got["/p1"][3], qid)
        self.assertEqual(got["/p2"][:2], (o1.port, "allow"))
        self.assertEqual(got["/p3"][:3],
                         (o2.port, "deny", "approval-timeout"))
        self.assertNotEqual(got["/p3"][3], qid)
        asks = [x["port"] for x in gw.audit_rows(host="port.test",
                                                 method="ASK")]
        self.assertEqual(asks, [o1.port, o2.port])


class _Hook(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.server.posts.append((time.time(), self.rfile.read(n)))
        self.send_response(204)
        self.end_headers()


class NotifySlowWebhookProbe(_Base):
    def test_slow_tls_webhook_bounded(self):
        """approvals.md: "one question at a time, each bounded to 10 s";
        docs/config.md `notify`: an https:// URL POSTed each new question.

        Sent: a webhook on https://localhost behind a relay that passes the
        server's bytes to the gateway in 200-byte pieces 3 s apart (on the
        first connection only; the next goes straight through). Question 1
        (one.test), then question 2 (two.test) 0.3 s later. Expected:
        question 1's POST is given up by 10 s, question 2's POST arrives
        within ~10 s of it being asked. Observed: question 1's handshake
        alone takes ~15 s (each recv stays under SO_RCVTIMEO), then its
        answer trickles the same way; question 2 is not POSTed within 20 s
        (the failure for question 1 is logged after ~40 s)."""
        import test_credentials as C
        pki_dir = T.TempDir("sgtest-notify-pki-")
        self.addCleanup(pki_dir.cleanup)
        os.chmod(pki_dir.path, 0o755)
        pki = C.TestCA(pki_dir.path)
        cert, key = pki.leaf("hook.test", ["localhost"])
        for p in (pki.d, pki.cert):
            os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)

        class TLSServer(http.server.ThreadingHTTPServer):
            # the handshake in each connection's own thread: one slow
            # handshake must not hold the accept loop (a harness stall)
            def finish_request(self, request, client_address):
                try:
                    request = ctx.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError):
                    return
                super().finish_request(request, client_address)
        srv = TLSServer(("127.0.0.1", 0), _Hook)
        srv.posts = []
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        lsn = socket.socket()
        self.addCleanup(lsn.close)
        lsn.bind(("127.0.0.1", 0))
        lsn.listen(8)
        stop = threading.Event()
        self.addCleanup(stop.set)
        socks = []

        def cleanup_socks():
            for s in socks:
                try:
                    s.close()
                except OSError:
                    pass
        self.addCleanup(cleanup_socks)

        def pump(a, b, chunk, delay):
            try:
                while not stop.is_set():
                    data = a.recv(chunk)
                    if not data:
                        break
                    if delay:
                        time.sleep(delay)
                    b.sendall(data)
            except OSError:
                pass

        def relay():
            n = 0
            while not stop.is_set():
                try:
                    c, _ = lsn.accept()
                except OSError:
                    return
                u = socket.create_connection(("127.0.0.1",
                                              srv.server_address[1]))
                socks.extend([c, u])
                threading.Thread(target=pump, args=(c, u, 65536, 0),
                                 daemon=True).start()
                threading.Thread(target=pump, args=(u, c, 200,
                                 3.0 if n == 0 else 0), daemon=True).start()
                n += 1
        threading.Thread(target=relay, daemon=True).start()
        self.start(notify="https://localhost:%d/hook" % lsn.getsockname()[1],
                   more={"upstream": {"ca_bundle": pki.cert}})
        self.send(dns_query("one.test", 1))
        time.sleep(0.3)
        t2 = time.time()
        self.send(dns_query("two.test", 2))
        deadline = t2 + 20 * T.SLOW
        while time.time() < deadline:
            if any(b"two.test" in b for _, b in srv.posts):
                break
            time.sleep(0.1)
        two = [t for t, b in srv.posts if b"two.test" in b]
        self.assertTrue(two and two[0] - t2 < 12 * T.SLOW,
                        "question 2 not POSTed within 12 s (posts: %s); "
                        "the notifier is held by question 1's slow TLS "
                        "webhook" % [(round(t - t2, 1), b[:40])
                                     for t, b in srv.posts])


if __name__ == "__main__":
    T.main()
