#!/usr/bin/env python3
"""A stand-in for Google's OAuth token endpoint and a metadata server, for tests.

Listens on 127.0.0.1 (a free port), prints `port N` once ready, and runs until its
standard input closes. Standard library only; signatures are checked with the
`openssl` command.

  POST /token   the JWT-bearer grant: the assertion's RS256 signature must verify
                against --public-key, its header and claims must be what Google asks
                for (iss, scope, aud = this URL, iat near now, exp = iat + at most 1 h);
                answers {"access_token", "expires_in", "token_type": "Bearer"} or an
                OAuth error (400 invalid_grant) saying what was wrong.
  GET  /computeMetadata/v1/instance/service-accounts/default/token
                a token, only with the request header Metadata-Flavor: Google, and
                the answer carries that header (as the real metadata server's does).
  POST /v1/projects/P/subscriptions/S:pull
                a stand-in for Pub/Sub's pull that only checks the bearer token: 401
                UNAUTHENTICATED unless it is the latest token issued (and not revoked),
                else an empty batch.
  GET|HEAD|PUT|DELETE /BUCKET/NAME   (with --bucket BUCKET) a stand-in for Cloud Storage's
                XML API, path-style, in memory: only the latest bearer token is accepted
                (401 otherwise; a SigV4 signature is refused and counted). A PUT makes a new
                generation (x-goog-generation); GET ?generation=N answers only while N is the
                live generation (404 NoSuchKey once it was replaced or deleted), as on a bucket
                without object versioning. GET /BUCKET?list-type=2 lists (for access checks).
  GET  /stats   counts, as JSON: tokens issued, refusals and their reasons, pulls
                answered and refused, bucket requests answered and refused, SigV4
                signatures seen, the generations asked for.

--fail-first N answers the first N requests to either token endpoint with 503.
--revoke-first treats the first token issued as revoked (the API refuses it with 401).
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METADATA_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.issued = 0
        self.refused = []
        self.fail_left = args.fail_first
        self.scopes = []
        self.latest = None
        self.pulls_ok = 0
        self.pulls_refused = 0
        self.objects = {}  # name -> (generation, bytes)
        self.generation = 1732540000000000
        self.bucket_ok = 0
        self.bucket_refused = 0
        self.sigv4 = 0
        self.generations_asked = []

    def next_token(self, kind):
        with self.lock:
            self.issued += 1
            token = f"fake-{kind}-token-{self.issued}"
            if not (self.args.revoke_first and self.issued == 1):
                self.latest = token
            return token

    def should_fail(self):
        with self.lock:
            if self.fail_left > 0:
                self.fail_left -= 1
                return True
            return False


def verify_assertion(state, assertion, audience):
    """Returns None when the assertion is what Google accepts, else the reason."""
    parts = assertion.split(".")
    if len(parts) != 3:
        return "not a JWS compact serialisation"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except Exception:
        return "header, claims or signature not base64url JSON"
    if header.get("alg") != "RS256" or header.get("typ", "JWT") != "JWT":
        return f"header {header}"
    if state.args.key_id and header.get("kid") != state.args.key_id:
        return "kid is not the key's id"
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(signature)
        sig_path = f.name
    try:
        check = subprocess.run(["openssl", "dgst", "-sha256", "-verify", state.args.public_key, "-signature", sig_path],
                               input=(parts[0] + "." + parts[1]).encode(), capture_output=True)
    finally:
        os.unlink(sig_path)
    if check.returncode != 0:
        return "Invalid JWT Signature."
    if claims.get("iss") != state.args.client_email:
        return "iss is not the service account"
    if claims.get("aud") != audience:
        return f"aud is not {audience}"
    scope = claims.get("scope")
    if not isinstance(scope, str) or not scope:
        return "no scope"
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int):
        return "iat and exp must be integers"
    if abs(iat - time.time()) > state.args.max_skew:
        return "iat is not now"
    if not (iat < exp <= iat + 3600):
        return "exp must be after iat and at most an hour later"
    with state.lock:
        state.scopes.append(scope)
    return None


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body, headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def refuse(self, status, error, reason, headers=()):
            with state.lock:
                state.refused.append(reason)
            self.reply(status, {"error": error, "error_description": reason}, headers)

        def bucket_request(self, method):
            """The Cloud Storage stand-in; False when the path is not the bucket's."""
            bucket = state.args.bucket
            path, _, query = self.path.partition("?")
            if not bucket or not (path == "/" + bucket or path.startswith("/" + bucket + "/")):
                return False
            params = urllib.parse.parse_qs(query, keep_blank_values=True)
            name = urllib.parse.unquote(path[len(bucket) + 2:])
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            authorization = self.headers.get("Authorization") or ""
            with state.lock:
                if authorization.startswith("AWS4-HMAC-SHA256"):
                    state.sigv4 += 1
                ok = state.latest is not None and authorization == f"Bearer {state.latest}"
                if ok:
                    state.bucket_ok += 1
                else:
                    state.bucket_refused += 1
            if not ok:
                return self.xml(401, b"<Error><Code>AuthenticationRequired</Code><Message>Authentication required.</Message></Error>")
            with state.lock:
                if method == "GET" and not name:
                    keys = sorted(k for k in state.objects if k.startswith((params.get("prefix") or [""])[0]))
                    items = "".join(f"<Contents><Key>{k}</Key><Size>{len(state.objects[k][1])}</Size><ETag>\"x\"</ETag></Contents>" for k in keys)
                    return self.xml(200, f"<ListBucketResult><IsTruncated>false</IsTruncated>{items}</ListBucketResult>".encode())
                if method == "PUT":
                    state.generation += 1
                    state.objects[name] = (state.generation, body)
                    return self.xml(200, b"", [("x-goog-generation", str(state.generation))])
                if method == "DELETE":
                    state.objects.pop(name, None)
                    return self.xml(204, b"")
                wanted = (params.get("generation") or [None])[0]
                if wanted is not None:
                    state.generations_asked.append(int(wanted))
                found = state.objects.get(name)
                if found is None or (wanted is not None and int(wanted) != found[0]):
                    return self.xml(404, b"<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>")
                generation, data = found
            headers = [("x-goog-generation", str(generation)), ("ETag", '"%s"' % generation)]
            if method == "HEAD":
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                for header in headers:
                    self.send_header(*header)
                self.end_headers()
                return True
            return self.xml(200, data, headers, content_type="application/octet-stream")

        def xml(self, status, data, headers=(), content_type="application/xml"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            return True

        def do_PUT(self):
            if not self.bucket_request("PUT"):
                self.reply(404, {"error": "not_found"})

        def do_HEAD(self):
            if not self.bucket_request("HEAD"):
                self.reply(404, {"error": "not_found"})

        def do_DELETE(self):
            if not self.bucket_request("DELETE"):
                self.reply(404, {"error": "not_found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            if self.path.startswith("/v1/projects/") and self.path.endswith(":pull"):
                with state.lock:
                    ok = state.latest is not None and self.headers.get("Authorization") == f"Bearer {state.latest}"
                    if ok:
                        state.pulls_ok += 1
                    else:
                        state.pulls_refused += 1
                if not ok:
                    return self.reply(401, {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}})
                return self.reply(200, {})
            if self.path != "/token":
                return self.reply(404, {"error": "not_found"})
            if state.should_fail():
                return self.reply(503, {"error": "unavailable"})
            if not (self.headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded"):
                return self.refuse(400, "invalid_request", "not a form")
            form = urllib.parse.parse_qs(body, keep_blank_values=True)
            if form.get("grant_type") != [GRANT]:
                return self.refuse(400, "unsupported_grant_type", "grant_type")
            assertion = (form.get("assertion") or [""])[0]
            host = self.headers.get("Host")
            reason = verify_assertion(state, assertion, f"http://{host}/token")
            if reason:
                return self.refuse(400, "invalid_grant", reason)
            self.reply(200, {"access_token": state.next_token("sa"), "expires_in": state.args.lifetime, "token_type": "Bearer"})

        def do_GET(self):
            if self.path == "/stats":
                with state.lock:
                    return self.reply(200, {"issued": state.issued, "refused": state.refused, "scopes": state.scopes,
                                            "pulls_ok": state.pulls_ok, "pulls_refused": state.pulls_refused,
                                            "bucket_ok": state.bucket_ok, "bucket_refused": state.bucket_refused,
                                            "sigv4": state.sigv4, "generations_asked": state.generations_asked})
            if self.bucket_request("GET"):
                return
            path = self.path.split("?", 1)[0]
            if path != METADATA_PATH:
                return self.reply(404, {"error": "not_found"})
            if state.should_fail():
                return self.reply(503, {"error": "unavailable"})
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.refuse(403, "forbidden", "missing Metadata-Flavor: Google")
            headers = [] if state.args.no_flavor else [("Metadata-Flavor", "Google")]
            self.reply(200, {"access_token": state.next_token("metadata"), "expires_in": state.args.lifetime, "token_type": "Bearer"}, headers)

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--public-key", required=True, help="PEM public key the assertions must verify against")
    parser.add_argument("--client-email", required=True)
    parser.add_argument("--key-id", default="")
    parser.add_argument("--lifetime", type=int, default=3600, help="expires_in of the tokens issued")
    parser.add_argument("--fail-first", type=int, default=0)
    parser.add_argument("--max-skew", type=int, default=300, help="seconds iat may be from now (a test whose clock runs ahead widens it)")
    parser.add_argument("--revoke-first", action="store_true", help="the first token issued is refused by the fake API")
    parser.add_argument("--bucket", default="", help="serve a Cloud Storage XML API stand-in for this bucket")
    parser.add_argument("--no-flavor", action="store_true", help="metadata answers without Metadata-Flavor (an impostor)")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(State(args)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"port {server.server_address[1]}", flush=True)
    sys.stdin.read()  # until the test closes our stdin (or dies)
    server.shutdown()


if __name__ == "__main__":
    main()
