#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTPKit
import Testing
import SnapThumbTesting
import SnapThumbStore
import SystemKit
@testable import SnapThumbCore
@testable import SnapThumbS3

/// A loopback HTTP server (plain Python, no dependency) that sends huge bodies for ever: one
/// announced by its Content-Length, one chunked without any, and counts what each request
/// got sent before the client hung up. A client that reads only up to its cap makes it stop.
final class EndlessServer: Sendable {
    let server: ServerProcess
    let port: Int

    static let script = #"""
import json, os, socket, sys, threading
lock = threading.Lock()
sent = {}
def serve(conn):
    f = conn.makefile("rb")
    try:
        while True:
            line = f.readline()
            if not line:
                return
            path = line.split()[1].decode()
            while f.readline() not in (b"\r\n", b"\n", b""):
                pass
            if path == "/sent":
                with lock:
                    body = json.dumps(sent).encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                continue
            name = path.split("?")[0].rsplit("/", 1)[-1]
            chunk = b"x" * 65536
            total = 0
            try:
                if name.startswith("announced"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 314572800\r\n\r\n")
                    while total < 314572800:
                        conn.sendall(chunk); total += len(chunk)
                elif name.startswith("chunked"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    while total < 314572800:
                        conn.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n"); total += len(chunk)
                    conn.sendall(b"0\r\n\r\n")
                else:
                    body = b"y" * 1000
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body); total = 1000
            except OSError:
                pass
            with lock:
                sent[name] = total
            if total >= 314572800 or not name.startswith(("announced", "chunked")):
                continue
            return
    finally:
        conn.close()
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(16)
print("port %d" % srv.getsockname()[1], flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""#

    init() throws {
        server = try ServerProcess("/usr/bin/env", ["python3", "-c", Self.script])
        guard server.firstLine.hasPrefix("port "), let port = Int(server.firstLine.dropFirst(5)) else {
            server.stop()
            throw SnapError(.internal, "the endless server did not start: \(server.firstLine)")
        }
        self.port = port
    }

    func url(_ name: String) -> URL { URL(string: "http://127.0.0.1:\(port)/\(name)")! }

    /// Bytes of the body each finished request got sent (a request still sending is absent).
    func sent() throws -> [String: Int] {
        let body = try HTTPTransport().sendBlocking(HTTPRequest(method: "GET", url: url("sent"))).body
        return try JSONDecoder().decode([String: Int].self, from: body)
    }
}

@Suite("HTTP bodies under a cap")
struct BodyCapTests {
    static let cap = 1 << 20

    @Test("a body announced (Content-Length) or running past the cap is not read: the answer comes back without it, flagged, and the server stops sending long before the 300 MB")
    func capped() throws {
        let server = try EndlessServer()
        let transport = HTTPTransport(timeout: 30)
        for name in ["announced-1", "chunked-1"] {
            let response = try transport.sendBlocking(HTTPRequest(method: "GET", url: server.url(name), maxBodyBytes: Self.cap))
            #expect(response.status == 200)
            #expect(response.bodyOverLimit, "\(name)")
            #expect(response.body.isEmpty, "\(name)")
            if name.hasPrefix("announced") { #expect(response.header("content-length") == "314572800") }
        }
        // The connection was closed, not drained: the server's sends failed early. (What it got
        // out is what the kernel's socket buffers took, a few MB at most on loopback.)
        let sent = try #require(try eventuallyValue { let s = try server.sent(); return s.count >= 2 ? s : nil })
        #expect((sent["announced-1"] ?? .max) < 64 << 20, "\(sent)")
        #expect((sent["chunked-1"] ?? .max) < 64 << 20, "\(sent)")
        // Within the cap: read whole, as before; no cap: the whole body.
        let small = try transport.sendBlocking(HTTPRequest(method: "GET", url: server.url("small"), maxBodyBytes: 1000))
        #expect(!small.bodyOverLimit && small.body.count == 1000)
        let over = try transport.sendBlocking(HTTPRequest(method: "GET", url: server.url("small"), maxBodyBytes: 999))
        #expect(over.bodyOverLimit && over.body.isEmpty)
        let uncapped = try transport.sendBlocking(HTTPRequest(method: "GET", url: server.url("small")))
        #expect(!uncapped.bodyOverLimit && uncapped.body.count == 1000)
    }

    @Test("the bucket's source reader refuses a body over --max-bytes as too-large without holding it, from its Content-Length or its length as sent")
    func sourceReader() throws {
        let server = try EndlessServer()
        let env = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-example", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:\(server.port)",
                   "AWS_REGION": "us-east-1"]
        // Path style: the object key is the URL's path after the bucket.
        let reader = try S3Sources(url: "s3://bkt/?path-style=true", environment: env)
        let announced = #expect(throws: SnapError.self) { _ = try reader.read("s3://bkt/announced-2", limit: Self.cap) }
        #expect(announced?.code == .tooLarge)
        #expect(announced?.message.contains("314572800 bytes") == true, "\(String(describing: announced))")
        let chunked = #expect(throws: SnapError.self) { _ = try reader.read("s3://bkt/chunked-2", limit: Self.cap) }
        #expect(chunked?.code == .tooLarge)
        #expect(chunked?.message.contains("more than \(Self.cap) bytes") == true, "\(String(describing: chunked))")
        // Refused once: a too-large body is an answer, not a transfer to retry.
        #expect(reader.client.requestsSent == 2)
        #expect(try reader.read("s3://bkt/small", limit: 1000).count == 1000)
    }
}

/// Polls (bounded by count, not by the clock's reading) until `value` gives something.
func eventuallyValue<T>(tries: Int = 200, every interval: Double = 0.05, _ value: () throws -> T?) rethrows -> T? {
    for _ in 0..<tries {
        if let found = try value() { return found }
        Thread.sleep(forTimeInterval: interval)
    }
    return try value()
}
