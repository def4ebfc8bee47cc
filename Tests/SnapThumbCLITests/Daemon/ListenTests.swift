#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTPKit
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3
@testable import SnapThumbQueue

/// `--listen` on both daemons, run as an operator runs them: the probes, and /metrics beside
/// the textfile, checked with promtool.
@Suite("daemon HTTP endpoints", .serialized)
struct ListenTests {
    static func get(_ address: String, _ path: String) throws -> (status: Int, body: String) {
        let response = try HTTPTransport(timeout: 30).sendBlocking(HTTPRequest(method: "GET", url: URL(string: "http://\(address)\(path)")!))
        return (response.status, String(decoding: response.body, as: UTF8.self))
    }

    /// The address a daemon logged it serves on (`snap.listen=…` in text, `"snap.listen":"…"` in JSON).
    static func address(in log: String) -> String? {
        if let match = log.firstMatch(of: /snap\.listen[=":]+([0-9.]+:[0-9]+)/) { return String(match.1) }
        return nil
    }

    /// Metric family names (the `# TYPE` lines) of a Prometheus text.
    static func families(_ text: String) -> Set<String> {
        Set(text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
    }

    static func promtool(_ text: String) throws -> (ok: Bool, output: String)? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") else { return nil }
        let check = try ChildProcess.combined("/usr/bin/promtool", ["check", "metrics"], input: Data(text.utf8))
        return (check.status == 0, check.output)
    }

    @Test("watch with SNAPTHUMB_LISTEN: /readyz 200 once claiming started, /healthz 200, /metrics promtool-clean with the textfile's families and counts; SIGTERM exits 0")
    func watch() throws {
        let h = try WatchHarness()
        let metrics = h.root + "/snapthumb.prom"
        let worker = try h.start(["--metrics-file", metrics, "--metrics-interval", "200ms"], environment: ["SNAPTHUMB_LISTEN": "127.0.0.1:0"])
        eventually("serving and watching") { worker.logText.contains("serving /healthz") && worker.logText.contains("watching") }
        let address = try #require(Self.address(in: worker.logText), "\(worker.logText)")
        #expect(try Self.get(address, "/readyz") == (200, "ready\n"))
        let health = try Self.get(address, "/healthz")
        #expect(health.status == 200 && health.body.hasPrefix("ok: ready"), "\(health)")

        try h.drop("ok.jpg", try TestImages.jpeg(1))
        try h.drop("bad.jpg", Array("nope".utf8))
        eventually("both uploads counted at /metrics") {
            let text = (try? Self.get(address, "/metrics").body) ?? ""
            return text.contains("snapthumb_watch_files_processed_total 1") && text.contains("snapthumb_watch_files_failed_total{code=\"unsupported\"} 1")
        }
        eventually("and in the textfile") {
            ((try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "").contains("snapthumb_watch_files_processed_total 1")
        }
        let served = try Self.get(address, "/metrics").body
        let file = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(Self.families(served) == Self.families(file) && Self.families(served).contains("snapthumb_build_info"), "\(served)\n---\n\(file)")
        if let check = try Self.promtool(served) { #expect(check.ok, "\(check.output)\n\(served)") }
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0, "\(worker.logText)")
        #expect((try? Self.get(address, "/healthz")) == nil, "the endpoints go with the process")
        // The server stops gracefully: no error line at a clean stop (cancelled, it logged
        // "Waiting on child channel: CancellationError()").
        #expect(!worker.logText.contains(" error ") && !worker.logText.contains("CancellationError"), "\(worker.logText)")
    }

    @Test("--listen mistakes are start-up failures (exit 2) that name the flag: not an address, an address in use")
    func mistakes() throws {
        let h = try WatchHarness()
        let bad = try h.start(["--listen", "example.com:9090"])
        #expect(bad.waitForExit(seconds: 60) == 2)
        #expect(bad.logText.contains("--listen must name an IP address"), "\(bad.logText)")

        let first = try h.start(["--listen", "127.0.0.1:0", "--worker-id", "one"])
        eventually("serving") { first.logText.contains("serving /healthz") }
        let address = try #require(Self.address(in: first.logText), "\(first.logText)")
        let second = try h.start(["--listen", address, "--worker-id", "two"])
        #expect(second.waitForExit(seconds: 60) == 2)
        #expect(second.logText.contains("watch: --listen: cannot listen on \(address): "), "\(second.logText)")
        first.signal(SIGTERM)
        #expect(first.waitForExit(seconds: 60) == 0)
    }

    @Test("consume with listen in the config file's consume section, and --metrics-file in a missing directory: warns, runs on, serves the probes and /metrics (promtool-clean); SIGTERM exits 0",
          .enabled(if: Repo.motoAvailable))
    func consume() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("listen"), visibility: 10)
        let configDirectory = Repo.tempDirectory()
        defer { Fixtures.remove(configDirectory) }
        let config = configDirectory + "/snapthumb.json"
        try Data("{\"consume\": {\"listen\": \"127.0.0.1:0\", \"metricsInterval\": \"200ms\"}}".utf8).write(to: URL(fileURLWithPath: config))
        let missing = configDirectory + "/no-such-directory/consume.prom"
        let daemon = try ConsumeTests.consume(moto, queue: queue, source: "s3://\(uploads)/p/", store: "s3://\(thumbs)/t",
                                              extra: ["--jobs", "1", "--config", config, "--metrics-file", missing])
        #expect(eventually(within: 60) { daemon.log.contains("\"msg\":\"consuming\"") }, "\(daemon.log)")
        #expect(daemon.log.contains("\"msg\":\"no metrics file\""), "\(daemon.log)")
        let address = try #require(Self.address(in: daemon.log), "\(daemon.log)")
        #expect(try Self.get(address, "/readyz") == (200, "ready\n"))
        #expect(try Self.get(address, "/healthz").status == 200)

        let sqs = try moto.sqs(queueURL: queue)
        try sqs.send(body: "not json at all")
        #expect(eventually(within: 60) { ((try? Self.get(address, "/metrics").body) ?? "").contains("snapthumb_consume_messages_received_total 1") })
        let served = try Self.get(address, "/metrics").body
        #expect(served.contains("snapthumb_consume_uploads_refused_total{code=") && served.contains("snapthumb_build_info{"), "\(served)")
        if let check = try Self.promtool(served) { #expect(check.ok, "\(check.output)\n\(served)") }
        #expect(daemon.terminate() == 0, "\(daemon.log)")
        #expect(!daemon.log.contains("Waiting on child channel") && !daemon.log.contains("CancellationError"), "\(daemon.log)")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }
}
