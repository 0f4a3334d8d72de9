#!/usr/bin/python3
"""
The escape probes of test_sandbox_escape.py, run INSIDE a sandbox with the
host's Debian python3: `python3 /workspace/escape_probe.py /workspace/go.json`.
It waits for the test to write go.json (the targets, known only once the
sandbox's network exists), runs every probe in parallel threads and prints one
JSON object: probe name -> what happened. It decides nothing; the test does.
Standard library only.
"""

import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

CURL = "/usr/bin/curl"
DIG = "/usr/bin/dig"


def oserr(e):
    return {"error": type(e).__name__, "errno": getattr(e, "errno", None),
        "msg": str(e)[:300]}


def wait_go(path, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(0.05)
    raise SystemExit("no %s within %d s" % (path, timeout))


def wait_go_file(path, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.05)


def sockaddr(host, port, scope=None):
    if ":" in host:
        return socket.AF_INET6, (host, port, 0, scope or 0)
    return socket.AF_INET, (host, port)


def tcp_http(host, port, hosthdr=None, scope=None, timeout=10):
    """Connect; send a GET naming hosthdr (None: send nothing); read to EOF."""
    fam, sa = sockaddr(host, port, scope)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    out = {"connected": False}
    try:
        s.connect(sa)
        out["connected"] = True
        if hosthdr is not None:
            s.sendall(("GET /escape HTTP/1.1\r\nHost: %s\r\n"
                "Connection: close\r\n\r\n" % hosthdr).encode())
        raw = b""
        while len(raw) < 65536:
            b = s.recv(65536)
            if not b:
                break
            raw += b
        out["raw"] = raw[:300].decode("latin-1")
        head = raw.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        if head[0].startswith("HTTP/"):
            out["status"] = int(head[0].split()[1])
            for line in head[1:]:
                k, _, v = line.partition(":")
                if k.strip().lower() == "x-sandgate-reason":
                    out["reason"] = v.strip()
    except OSError as e:
        out.update(oserr(e))
    finally:
        s.close()
    return out


def tls(host, port, sni, timeout=10):
    """A TLS handshake trusting the sandbox's CA bundle (default paths)."""
    ctx = ssl.create_default_context()
    out = {"connected": False}
    try:
        s = socket.create_connection((host, port), timeout)
    except OSError as e:
        out.update(oserr(e))
        return out
    out["connected"] = True
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        out["handshake"] = True
        out["issuer"] = dict(x[0] for x in t.getpeercert()["issuer"])
        t.close()
    except (ssl.SSLError, OSError) as e:
        out["handshake"] = False
        out.update(oserr(e))
    finally:
        s.close()
    return out


def curl(*args):
    r = subprocess.run([CURL, "-sS", "--noproxy", "*", "-m", "15"] +
        list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        timeout=40)
    return {"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace")[:2000],
        "err": r.stderr.decode("utf-8", "replace")[-500:]}


def urllib_get(url):
    try:
        with urllib.request.urlopen(url, timeout=15) as r:
            return {"status": r.status, "body": r.read(2000).decode("utf-8",
                "replace")}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "reason": e.headers.get("X-Sandgate-Reason")}
    except urllib.error.URLError as e:
        return {"error": "URLError", "msg": str(e.reason)[:300]}
    except OSError as e:
        return oserr(e)


def udp(host, port, n=3, scope=None, broadcast=False):
    fam, sa = sockaddr(host, port, scope)
    s = socket.socket(fam, socket.SOCK_DGRAM)
    out = {"sent": 0}
    try:
        if broadcast:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        for i in range(n):
            s.sendto(b"sandgate-escape-%d" % i, sa)
            out["sent"] += 1
            time.sleep(0.05)
    except OSError as e:
        out.update(oserr(e))
    finally:
        s.close()
    return out


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    s += s >> 16
    return ~s & 0xffff


def ping(host, n=3, scope=None, wait=2.0):
    """
    Echo requests through an ICMP datagram ("ping") socket, which needs no
    capability, only net.ipv4.ping_group_range (the test opens it in the
    sandbox's namespace so that the network, not a missing socket, decides).
    """
    v6 = ":" in host
    fam, sa = sockaddr(host, 0, scope)
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    out = {"sent": 0, "replies": 0}
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM, proto)
    except OSError as e:
        out["socket"] = oserr(e)
        return out
    s.settimeout(0.2)
    try:
        for i in range(n):
            typ = 128 if v6 else 8
            body = struct.pack("!HH", 0, i) + b"sandgate-escape"
            pkt = struct.pack("!BBH", typ, 0, 0) + body
            pkt = struct.pack("!BBH", typ, 0, csum(pkt)) + body
            try:
                s.sendto(pkt, sa)
                out["sent"] += 1
            except OSError as e:
                out["send_error"] = oserr(e)
                break
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                b, _ = s.recvfrom(2048)
            except socket.timeout:
                continue
            except OSError as e:
                out["recv_error"] = oserr(e)
                break
            if b and b[0] in (0, 129):
                out["replies"] += 1
    finally:
        s.close()
    return out


def dig(*args):
    r = subprocess.run([DIG, "+time=3", "+tries=1"] + list(args),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    return {"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace")}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return "ERR " + str(e)


def run_ip(*args):
    try:
        r = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, timeout=10)
        return {"rc": r.returncode, "out": r.stdout.decode("utf-8", "replace")}
    except OSError as e:
        return oserr(e)


def main():
    g = wait_go(sys.argv[1])
    gw, org, ih = g["gw"], g["origin"], g["inet_host"]
    o6, ll, sc = g["origin6"], g["gw_ll"], None
    try:
        sc = socket.if_nametoindex("eth0")
    except OSError:
        pass
    tp, up = g["tcp"], g["udp"]
    probes = {
        # allowed HTTPS name, intercepted, trusted through the generated bundle
        "https_curl": lambda: curl("-o", "-", "-w", "\nHTTP=%{http_code}",
            "https://allowed.test/escape-curl"),
        "https_urllib": lambda: urllib_get("https://allowed.test/escape-urllib"),
        # denied name: 403 for HTTP, an alert for TLS (origin address by hand:
        # the gateway's DNS does not give it)
        "http_denied": lambda: tcp_http(org, 80, "denied.test"),
        "https_denied_py": lambda: tls(org, 443, "denied.test"),
        "https_denied_curl": lambda: curl("--resolve", "denied.test:443:" + org,
            "https://denied.test/"),
        # bare addresses nobody resolved: an origin, HTTP and silent
        "bare_ip_http": lambda: tcp_http(g["bare"], 80, g["bare"]),
        "bare_ip_silent": lambda: tcp_http(g["bare"], 2323, None, timeout=15),
        # the host's own addresses and services
        "host_gw_bound": lambda: tcp_http(gw, tp["gw"], gw),
        "host_gw_wild": lambda: tcp_http(gw, tp["wild"], gw),
        "host_addr_bound": lambda: tcp_http(ih, tp["hostaddr"], ih),
        "host_addr_wild": lambda: tcp_http(ih, tp["wild"], ih),
        "host_lo_bound": lambda: tcp_http("127.0.0.1", tp["lo"], "127.0.0.1"),
        "host_lo_wild": lambda: tcp_http("127.0.0.1", tp["wild"], "127.0.0.1"),
        "direct_transparent": lambda: tcp_http(gw, tp["transparent"],
            "allowed.test"),
        "metadata": lambda: tcp_http("169.254.169.254", 80, "169.254.169.254"),
        # UDP anywhere but the DNS listener
        "udp_inet": lambda: udp(org, up["inet"]),
        "udp_gw_bound": lambda: udp(gw, up["gw"]),
        "udp_gw_wild": lambda: udp(gw, up["wild"]),
        "udp_host_addr": lambda: udp(ih, up["wild"]),
        "udp_bcast": lambda: udp("255.255.255.255", up["wild"], broadcast=True),
        "udp_subnet_bcast": lambda: udp(g["bcast"], up["wild"], broadcast=True),
        # DNS: a denied name, and a query aimed at another server
        "dns_denied": lambda: dig("denied.test", "A"),
        "dns_elsewhere": lambda: dig("@" + org, "allowed.test", "A"),
        # ICMP
        "ping_inet": lambda: ping(org),
        "ping_host_addr": lambda: ping(ih),
        "ping_gw": lambda: ping(gw),
        # IPv6
        "v6_addr": lambda: run_ip("-6", "addr"),
        "v6_route": lambda: run_ip("-6", "route"),
        "v6_if_inet6": lambda: read("/proc/net/if_inet6"),
        "v6_tcp_origin": lambda: tcp_http(o6, 80, "[%s]" % o6, timeout=5),
        "v6_curl_name": lambda: curl("-6", "-m", "5", "http://v6.test/"),
        "v6_tcp_gw_ll": lambda: tcp_http(ll, tp["wild6"], "x", scope=sc,
            timeout=5),
        "v6_udp_origin": lambda: udp(o6, up["inet6"]),
        "v6_udp_gw_ll": lambda: udp(ll, up["wild6"], scope=sc),
        "v6_udp_allnodes": lambda: udp("ff02::1", up["wild6"], scope=sc),
        "v6_ping_origin": lambda: ping(o6),
        "v6_ping_gw_ll": lambda: ping(ll, scope=sc),
    }
    res = {}

    def traced(k, f):
        # progress on stderr: a sandbox that dies mid-way shows where
        print("start " + k, file=sys.stderr, flush=True)
        try:
            return f()
        finally:
            print("done " + k, file=sys.stderr, flush=True)

    # A few at a time: under runsc the sandbox's pids limit counts the
    # sentry's host threads, and 30-odd busy threads exhaust the default 256.
    with ThreadPoolExecutor(max_workers=6) as ex:
        futs = {k: ex.submit(traced, k, f) for k, f in probes.items()}
        for k, f in futs.items():
            try:
                res[k] = f.result(timeout=60)
            except Exception as e:  # a probe that crashed is a result too
                res[k] = {"crash": repr(e)}
    res["eth0_index"] = sc
    print(json.dumps(res), flush=True)
    # the test counts what arrived while the sandbox still exists, then
    # writes "done" next to go.json
    wait_go_file(os.path.join(os.path.dirname(sys.argv[1]), "done"))


if __name__ == "__main__":
    main()
