#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy on 127.0.0.1, for the bucket store's tests and benchmark.

    fault-proxy.py --upstream 127.0.0.1:PORT [--latency-ms 20] [--slowdown 0.3]
                   [--drop 0.1] [--seed 1] [--stats FILE]

Listens on a free loopback port and prints it as the first line of standard
output ("port N"). Each request read from a client is, in order:
  - delayed by --latency-ms (a round trip that long, per request),
  - (only for --fault-methods, when given)
  - with probability --slowdown answered "503 SlowDown" without reaching upstream,
  - with probability --drop forwarded, then the client's connection closed without
    an answer (the write may or may not have happened: the client must retry safely),
  - else forwarded on a kept-alive upstream connection and the answer relayed.
Servers that misbehave in other ways, on request:
  --accept-overwrites    a PUT carrying If-None-Match that upstream refuses (412) is
                         answered 200, as by a server that ignores conditional writes
  --refuse-if-match      a PUT carrying If-Match is answered 412 without reaching upstream,
                         as by a server that never replaces conditionally
  --empty-get TEXT       a 200 answer to a GET whose path contains TEXT loses its body
                         (Content-Length: 0), as from a broken cache
  --garble-get TEXT      with probability --garble-rate, a 200 answer to a GET whose path
                         contains TEXT is damaged: a byte flipped (a random one, same length), or every
                         other time cut in half and sent chunked under its original
                         Content-Length (a length that no longer matches); --garble-mode
                         flip or cut does only the one; --garble-max-run N: never
                         more than N damaged answers in a row for one path (a client
                         that retries more often than that always gets a good one)
Counts (requests, by method, injected faults, requests that asked for
`Expect: 100-continue`, User-Agents) are written as JSON to --stats on every request.
Stops when standard input closes. Never connects anywhere but --upstream, on loopback.
"""
import argparse
import json
import random
import socket
import socketserver
import sys
import threading
import time

lock = threading.Lock()
runs = {}  # path -> damaged answers in a row (--garble-max-run)


def garble_now(args, path, draw):
    """Whether this answer for `path` is damaged: with probability --garble-rate, but
    never more than --garble-max-run times in a row for one path."""
    with lock:
        run = runs.get(path, 0)
        damaged = draw < args.garble_rate and not (args.garble_max_run and run >= args.garble_max_run)
        runs[path] = run + 1 if damaged else 0
        return damaged

stats = {"requests": 0, "methods": {}, "slowdowns": 0, "drops": 0, "expect_continue": 0, "forwarded": 0, "puts_ok": {},
         "user_agents": {}, "puts": {}, "overwrites_accepted": 0, "if_match_refused": 0, "emptied": 0, "garbled": 0}


def record(args, **changes):
    with lock:
        for k, v in changes.items():
            if k == "method":
                stats["methods"][v] = stats["methods"].get(v, 0) + 1
            elif k in ("put_ok", "put", "user_agent"):
                table = {"put_ok": "puts_ok", "put": "puts", "user_agent": "user_agents"}[k]
                stats[table][v] = stats[table].get(v, 0) + 1
            else:
                stats[k] += v
        if args.stats:
            with open(args.stats + ".tmp", "w") as f:
                json.dump(stats, f)
            import os
            os.replace(args.stats + ".tmp", args.stats)


def read_message(reader, request_method=None, is_response=False):
    """Reads one HTTP/1.1 message: (start line, header lines, body) or None at EOF."""
    start = reader.readline()
    if not start:
        return None
    while start in (b"\r\n", b"\n"):
        start = reader.readline()
        if not start:
            return None
    headers = []
    while True:
        line = reader.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        headers.append(line)
    fields = {}
    for h in headers:
        name, _, value = h.decode("latin-1").partition(":")
        fields[name.strip().lower()] = value.strip()
    body = b""
    status = int(start.split()[1]) if is_response else 0
    if is_response and (request_method == "HEAD" or status in (204, 304) or 100 <= status < 200):
        return start, headers, body
    if fields.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size_line = reader.readline()
            size = int(size_line.split(b";")[0].strip(), 16)
            chunks.append(size_line)
            if size == 0:
                # trailers, if any, then the blank line that ends the message
                while True:
                    t = reader.readline()
                    chunks.append(t)
                    if t in (b"\r\n", b"\n", b""):
                        break
                break
            chunks.append(reader.read(size + 2))
        body = b"".join(chunks)
    elif "content-length" in fields:
        body = reader.read(int(fields["content-length"]))
    elif is_response:
        body = reader.read()
    return start, headers, body


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        args = self.server.args
        upstream = None
        up_reader = None
        try:
            while True:
                message = read_message(self.rfile)
                if message is None:
                    return
                start, headers, body = message
                method = start.split()[0].decode()
                path = start.split()[1].decode("latin-1").split("?")[0]
                names = {h.split(b":", 1)[0].strip().lower(): h.split(b":", 1)[1].strip() for h in headers if b":" in h}
                expects = b"100-continue" in names.get(b"expect", b"").lower()
                agent = names.get(b"user-agent", b"").decode("latin-1")
                record(args, requests=1, method=method, expect_continue=1 if expects else 0, user_agent=agent)
                if method == "PUT":
                    record(args, put=path)
                if method == "PUT" and args.refuse_if_match and b"if-match" in names:
                    record(args, if_match_refused=1)
                    payload = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>PreconditionFailed</Code>"
                               b"<Message>At least one of the pre-conditions you specified did not hold</Message></Error>")
                    self.wfile.write(b"HTTP/1.1 412 Precondition Failed\r\nContent-Type: application/xml\r\nContent-Length: "
                                     + str(len(payload)).encode() + b"\r\n\r\n" + payload)
                    self.wfile.flush()
                    continue
                if args.latency_ms > 0:
                    time.sleep(args.latency_ms / 1000.0)
                roll = self.server.random()
                if args.fault_methods and method not in args.fault_methods.split(","):
                    roll = 1.0
                if roll < args.slowdown:
                    record(args, slowdowns=1)
                    payload = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
                               b"<Message>Please reduce your request rate.</Message></Error>")
                    self.wfile.write(b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: "
                                     + str(len(payload)).encode() + b"\r\n\r\n" + payload)
                    self.wfile.flush()
                    continue
                drop = roll < args.slowdown + args.drop
                if upstream is None:
                    upstream = socket.create_connection(self.server.upstream)
                    up_reader = upstream.makefile("rb")
                upstream.sendall(start + b"".join(headers) + b"\r\n" + body)
                answer = read_message(up_reader, request_method=method, is_response=True)
                if answer is None:
                    return
                record(args, forwarded=1)
                if drop:
                    record(args, drops=1)
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                a_start, a_headers, a_body = answer
                status = a_start.split()[1]
                if method == "PUT" and status == b"412" and args.accept_overwrites and b"if-none-match" in names:
                    record(args, overwrites_accepted=1)
                    # Upstream's other headers stay (its Connection: close above all: moto closes after an error).
                    kept = [h for h in a_headers if not h.lower().startswith((b"content-length:", b"content-type:"))]
                    a_start, a_headers, a_body = b"HTTP/1.1 200 OK\r\n", kept + [b"Content-Length: 0\r\n"], b""
                    status = b"200"
                if method == "PUT" and status.startswith(b"2"):
                    record(args, put_ok=path)
                chunked = False
                framed = (any(h.lower().startswith(b"content-length:") for h in a_headers)
                          and not any(h.lower().startswith(b"transfer-encoding:") for h in a_headers))
                if method == "GET" and status == b"200" and a_body and framed:
                    if args.empty_get and args.empty_get in path:
                        record(args, emptied=1)
                        a_headers = [h for h in a_headers if not h.lower().startswith(b"content-length:")] + [b"Content-Length: 0\r\n"]
                        a_body = b""
                    elif args.garble_get and args.garble_get in path and garble_now(args, path, self.server.random()):
                        with lock:
                            stats["garbled"] += 1
                            n = stats["garbled"]
                        if args.garble_mode == "flip" or args.garble_mode == "both" and n % 2 == 1:
                            # Somewhere else each time, as transfer damage would be.
                            i = min(len(a_body) - 1, int(self.server.random() * len(a_body)))
                            a_body = a_body[:i] + bytes([a_body[i] ^ 0x01]) + a_body[i + 1:]
                        else:
                            chunked = True
                            a_headers = a_headers + [b"Transfer-Encoding: chunked\r\n"]
                            half = a_body[: len(a_body) // 2]
                            a_body = (b"%x\r\n" % len(half)) + half + b"\r\n0\r\n\r\n" if half else b"0\r\n\r\n"
                self.wfile.write(a_start + b"".join(a_headers) + b"\r\n" + a_body)
                self.wfile.flush()
                if chunked:
                    # A client cannot trust the connection after that answer.
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
        except (ConnectionError, OSError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream.close()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--latency-ms", type=float, default=0)
    parser.add_argument("--slowdown", type=float, default=0)
    parser.add_argument("--drop", type=float, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stats")
    parser.add_argument("--fault-methods", help="inject faults only into these methods (comma-separated)")
    parser.add_argument("--accept-overwrites", action="store_true")
    parser.add_argument("--refuse-if-match", action="store_true")
    parser.add_argument("--empty-get")
    parser.add_argument("--garble-get")
    parser.add_argument("--garble-rate", type=float, default=0.5)
    parser.add_argument("--garble-mode", choices=["both", "flip", "cut"], default="both")
    parser.add_argument("--garble-max-run", type=int, default=0)
    args = parser.parse_args()
    host, _, port = args.upstream.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1"):
        print("fault-proxy: upstream must be on loopback", file=sys.stderr)
        return 2
    server = Server(("127.0.0.1", 0), Handler)
    server.args = args
    server.upstream = (host, int(port))
    rng = random.Random(args.seed)
    rng_lock = threading.Lock()

    def roll():
        with rng_lock:
            return rng.random()
    server.random = roll
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"port {server.server_address[1]}", flush=True)
    sys.stdin.read()
    server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
