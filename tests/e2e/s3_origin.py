#!/usr/bin/python3
"""
An HTTPS origin for the aws_sigv4 tests (test_cred_sigv4.py,
test_sandbox_sigv4.py): a small S3 (PUT, GET, HEAD, DELETE of objects,
ListObjectsV2) and a JSON API in the style of DynamoDB (POST / with
X-Amz-Target), that checks the signature of every request with botocore's
own signer and the REAL key -- header form and presigned query form -- and
answers 403 SignatureDoesNotMatch otherwise. GET /<bucket>/leak answers the
real key id, secret and token (an API that echoes credentials: the gateway
must scrub them). Every request is logged as a JSON line.

Run: s3_origin.py --bind ADDR --port N --cert C --key K --keyid ID
     --secret S [--token T] --log FILE   (prints "ready" when listening)
"""

import argparse
import hashlib
import json
import re
import socketserver
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from botocore.auth import S3SigV4Auth, S3SigV4QueryAuth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/"
                     r"([^/]+)/aws4_request, ?SignedHeaders=([^, ]+), ?"
                     r"Signature=([0-9a-f]{64})$")


class Store:
    def __init__(self, args):
        self.args = args
        self.objects = {}
        self.lock = threading.Lock()
        self.logf = open(args.log, "a", buffering=1)

    def log(self, rec):
        with self.lock:
            self.logf.write(json.dumps(rec) + "\n")


def check_header_form(h, store, method, raw_path, headers, body):
    a = store.args
    m = AUTH_RE.match(headers.get("Authorization", ""))
    if not m:
        return "Authorization is not SigV4"
    keyid, date, region, service, signed, sig = m.groups()
    if keyid != a.keyid:
        return "key id %r is not the real one" % keyid
    tok = headers.get("X-Amz-Security-Token")
    if (a.token or None) != tok:
        return "session token %r is not the real one" % (tok,)
    if a.token and "x-amz-security-token" not in signed.split(";"):
        return "the session token is not signed"
    amz = headers.get("X-Amz-Date", "")
    if amz[:8] != date:
        return "X-Amz-Date %r does not match the scope" % amz
    req = AWSRequest(method=method, url="https://%s%s" % (
        headers.get("Host", ""), raw_path), data=body)
    for name in signed.split(";"):
        vals = headers.get_all(name) or []
        if not vals:
            return "signed header %s is missing" % name
        req.headers[name] = ",".join(vals)
    cls = S3SigV4Auth if service == "s3" else SigV4Auth
    auth = cls(Credentials(a.keyid, a.secret, a.token), service, region)
    req.context["timestamp"] = amz
    creq = auth.canonical_request(req)
    want = auth.signature(auth.string_to_sign(req, creq), req)
    if want != sig:
        return "signature mismatch"
    if "X-Amz-Content-SHA256" in headers:
        claimed = headers["X-Amz-Content-SHA256"]
        if re.fullmatch(r"[0-9a-f]{64}", claimed) and \
                claimed != hashlib.sha256(body).hexdigest():
            return "payload hash mismatch"
    return None


def check_query_form(h, store, method, raw_path, headers, body):
    a = store.args
    split = urlsplit(raw_path)
    q = parse_qs(split.query, keep_blank_values=True)
    try:
        cred = q["X-Amz-Credential"][0]
        sig = q["X-Amz-Signature"][0]
        amz = q["X-Amz-Date"][0]
        signed = q["X-Amz-SignedHeaders"][0]
    except KeyError as e:
        return "presigned URL lacks %s" % e
    keyid, date, region, service, _ = cred.split("/")
    if keyid != a.keyid:
        return "key id %r is not the real one" % keyid
    if (a.token or None) != q.get("X-Amz-Security-Token", [None])[0]:
        return "session token is not the real one"
    pairs = [p for p in split.query.split("&")
             if unquote(p.partition("=")[0]) != "X-Amz-Signature"]
    url = "https://%s%s?%s" % (headers.get("Host", ""), split.path,
                               "&".join(pairs))
    req = AWSRequest(method=method, url=url, data=body)
    for name in signed.split(";"):
        vals = headers.get_all(name) or []
        if not vals:
            return "signed header %s is missing" % name
        req.headers[name] = ",".join(vals)
    cls = S3SigV4QueryAuth if service == "s3" else SigV4Auth
    auth = cls(Credentials(a.keyid, a.secret, a.token), service, region)
    req.context["timestamp"] = amz
    creq = auth.canonical_request(req)
    want = auth.signature(auth.string_to_sign(req, creq), req)
    return None if want == sig else "signature mismatch"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, status, body=b"", ctype="application/xml", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def handle_any(self):
        store = self.server.store
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        split = urlsplit(self.path)
        presigned = "X-Amz-Signature" in parse_qs(split.query)
        check = check_query_form if presigned else check_header_form
        try:
            why = check(self, store, self.command, self.path, self.headers, body)
        except Exception as e:  # a malformed request is a refusal here
            why = "verifier error: %r" % e
        rec = {"method": self.command, "path": self.path, "ok": why is None,
               "why": why, "presigned": presigned,
               "auth": self.headers.get("Authorization"),
               "token": self.headers.get("X-Amz-Security-Token"),
               "sha": self.headers.get("X-Amz-Content-SHA256"),
               "len": len(body)}
        store.log(rec)
        if why is not None:
            self.answer(403, ("<Error><Code>SignatureDoesNotMatch</Code>"
                              "<Message>%s</Message></Error>" % why).encode())
            return
        target = self.headers.get("X-Amz-Target")
        if target:
            self.answer(200, json.dumps({"TableNames": [], "Target": target,
                "Length": len(body)}).encode(), "application/x-amz-json-1.0")
            return
        parts = split.path.lstrip("/").split("/", 1)
        bucket, key = parts[0], unquote(parts[1]) if len(parts) > 1 else ""
        a = store.args
        if key == "leak":
            self.answer(200, json.dumps({"AccessKeyId": a.keyid,
                "SecretAccessKey": a.secret, "SessionToken": a.token}).encode(),
                "application/json")
            return
        with store.lock:
            if self.command == "PUT" and key:
                store.objects[(bucket, key)] = body
                self.answer(200, extra=[("ETag", '"%s"' % hashlib.md5(
                    body).hexdigest())])
            elif self.command in ("GET", "HEAD") and key:
                obj = store.objects.get((bucket, key))
                if obj is None:
                    self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
                else:
                    self.answer(200, obj, "application/octet-stream")
            elif self.command == "DELETE" and key:
                store.objects.pop((bucket, key), None)
                self.answer(204)
            elif self.command == "GET":
                keys = sorted(k for (b, k) in store.objects if b == bucket)
                xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                       "<ListBucketResult><Name>%s</Name><KeyCount>%d</KeyCount>"
                       "<IsTruncated>false</IsTruncated>%s</ListBucketResult>" %
                       (bucket, len(keys), "".join(
                           "<Contents><Key>%s</Key><Size>%d</Size></Contents>" %
                           (k, len(store.objects[(bucket, k)])) for k in keys)))
                self.answer(200, xml.encode())
            else:
                self.answer(400, b"<Error><Code>BadRequest</Code></Error>")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    for k in ("bind", "cert", "key", "keyid", "secret", "log"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", default=None)
    args = ap.parse_args()
    srv = Server((args.bind, args.port), Handler)
    srv.store = Store(args)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("ready %d" % srv.server_address[1], flush=True)
    srv.serve_forever(poll_interval=0.1)


if __name__ == "__main__":
    sys.exit(main())
