#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3

/// `snapthumb watch --store s3://…` against moto (auth mode) on 127.0.0.1.
@Suite("S3 watch", .serialized, .enabled(if: Repo.motoAvailable))
struct S3WatchTests {
    final class Uploads {
        let root = Repo.tempDirectory("snapthumb-s3-watch")
        var incoming: String { root + "/up/incoming" }
        init() throws {
            try FileManager.default.createDirectory(atPath: incoming, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/staging", withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: root) }

        func drop(_ name: String, from sample: String) throws {
            try FileManager.default.copyItem(atPath: Repo.sample(sample), toPath: "\(root)/staging/\(name)")
            guard rename("\(root)/staging/\(name)", "\(incoming)/\(name)") == 0 else { throw SnapError(.io, "rename") }
        }

        func names(in sub: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/up/\(sub)")) ?? [])
                .filter { !$0.hasPrefix(".") && !$0.hasSuffix(".error.json") && !$0.hasSuffix(".lease") }.sorted()
        }

        var claimed: [String] {
            names(in: "processing").flatMap { names(in: "processing/\($0)") }
        }

        func start(store: String, environment: [String: String], log: String) throws -> SpawnedProcess {
            var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SNAPTHUMB_") && !$0.key.hasPrefix("AWS_") }
            env.merge(environment) { $1 }
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let file = try #require(FileHandle(forWritingAtPath: log))
            defer { try? file.close() }
            return try SpawnedProcess(CLI.binary, ["watch", root + "/up", "--store", store, "--settle", "200ms", "--jobs", "2", "--worker-id", "w1",
                                                   "--lease-timeout", "2s", "--log-level", "info"],
                                      environment: env, stdout: .null, stderr: .descriptor(file.fileDescriptor))
        }
    }

    static func waitUntil(_ seconds: Double = 120, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(100_000)
        }
        return condition()
    }

    static let samples = ["snaps/grey.jpg", "snaps/phone-portrait.jpg", "snaps/alpha.png", "snaps/adobe-rgb.jpg"]

    @Test("kill -9 mid-batch, restart: every upload published exactly once, all in done/, verify clean")
    func killAndRestart() throws {
        let (moto, bucket) = try Moto.withBucket()
        try Self.killAndRestart(moto, bucket: bucket)
    }

    /// The kill -9 check, against any server.
    static func killAndRestart(_ server: any S3Server, bucket: String, prefix: String = "w") throws {
        // A 30 ms round trip keeps uploads in flight long enough to be killed mid-batch.
        let proxy = try FaultProxy(upstreamPort: server.port, latencyMs: 30)
        let env = server.environment(endpoint: proxy.endpoint)
        let uploads = try Uploads()
        let count = 24
        for i in 0 ..< count { try uploads.drop("u\(i).\(i % 4 == 2 ? "png" : "jpg")", from: Self.samples[i % 4]) }
        let store = "s3://\(bucket)/\(prefix)"
        func manifestPuts() -> [String: Int] { proxy.stats.puts_ok.filter { $0.key.contains("/manifests/") } }

        let first = try uploads.start(store: store, environment: env, log: uploads.root + "/w0.log")
        #expect(Self.waitUntil { manifestPuts().count >= 3 }, "nothing published")
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let publishedBeforeKill = manifestPuts().count
        #expect(publishedBeforeKill < count, "everything was done before the kill: not mid-batch")

        let second = try uploads.start(store: store, environment: env, log: uploads.root + "/w1.log")
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL); second.waitUntilExit() } }
        #expect(Self.waitUntil { uploads.names(in: "done").count == count && uploads.claimed.isEmpty },
                "done: \(uploads.names(in: "done").count), claimed: \(uploads.claimed)")
        second.terminate()
        second.waitUntilExit()

        #expect(uploads.names(in: "incoming").isEmpty)
        #expect(uploads.names(in: "failed").isEmpty)
        let puts = manifestPuts()
        #expect(puts.count == count, "\(puts)")
        #expect(puts.values.allSatisfy { $0 == 1 }, "a manifest was written twice: \(puts.filter { $0.value != 1 })")
        let verify = try CloudCLI.run(["verify", store], environment: server.environment())
        #expect(verify.status == 0, "\(verify.stdout)")
        #expect(verify.stderr.contains("\(count) manifests: ok"))
    }

    @Test("store unreachable mid-run: the claim goes back to incoming/ (never failed/), and is published once it is back")
    func transientStoreFailure() throws {
        let (moto, bucket) = try Moto.withBucket()
        let proxy = try FaultProxy(upstreamPort: moto.port, slowdown: 1, faultMethods: "PUT")
        var env = moto.environment(endpoint: proxy.endpoint)
        env["AWS_MAX_ATTEMPTS"] = "2"
        let uploads = try Uploads()
        try uploads.drop("a.jpg", from: "snaps/grey.jpg")
        let log = uploads.root + "/w.log"
        let watch = try uploads.start(store: "s3://\(bucket)/w", environment: env, log: log)
        #expect(Self.waitUntil(60) { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("transient failure") })
        kill(watch.processIdentifier, SIGTERM)
        watch.waitUntilExit()
        #expect(uploads.names(in: "failed").isEmpty)
        #expect(uploads.names(in: "incoming") == ["a.jpg"] || uploads.claimed == ["a.jpg"])
        let logText = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(logText.contains("snap.code=store"))
        #expect(!logText.contains(moto.secretAccessKey) && !logText.contains(moto.accessKeyID))

        // The store is back: the same upload is published.
        let again = try uploads.start(store: "s3://\(bucket)/w", environment: moto.environment(), log: uploads.root + "/w2.log")
        defer { if again.isRunning { kill(again.processIdentifier, SIGKILL); again.waitUntilExit() } }
        #expect(Self.waitUntil { uploads.names(in: "done") == ["a.jpg"] })
        again.terminate()
        again.waitUntilExit()
        #expect(try moto.client(bucket: bucket).head("w/manifests/a.jpg.json"))
    }
}
