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
import VipsKit

/// What SnapThumb does not take on trust from a server: that it refuses overwrites
/// under the create-only header, that it replaces under If-Match, that a body is
/// what was stored. moto (auth mode) behind Scripts/fault-proxy.py, which plays
/// the servers that misbehave.
@Suite("S3 trust", .serialized, .enabled(if: Repo.motoAvailable))
struct S3TrustTests {
    static let samples = Repo.sample("snaps")

    /// One sample through the pipeline (as SnapThumbS3Tests' S3StoreTests makes them).
    static func upload(_ sample: String, key: String? = nil) throws -> ProcessedUpload {
        let bytes = [UInt8](FileManager.default.contents(atPath: Repo.sample(sample))!)
        return try Pipeline(settings: Settings()).process(SourceBuffer(bytes), key: key ?? (sample as NSString).lastPathComponent)
    }

    @Test("the shared checks against moto: first write, rerun, re-derive, conflict, replace, verify; PUTs once; User-Agent")
    func publishCycle() throws {
        let (moto, bucket) = try Moto.withBucket()
        try S3Scenarios.publishCycle(moto, bucket: bucket)
    }

    @Test("a server that accepts an overwrite under If-None-Match: exit 2 naming it and the endpoint, nothing published; the opt-in runs with a warning")
    func ignoresConditionalWrites() throws {
        let (moto, bucket) = try Moto.withBucket()
        let proxy = try FaultProxy(upstreamPort: moto.port, misbehaviour: ["--accept-overwrites"])
        let env = moto.environment(endpoint: proxy.endpoint)
        let tree = try S3CommandLineTests.uploadsTree()
        let up = Repo.tempDirectory()
        defer { for p in [tree, up] { try? FileManager.default.removeItem(atPath: p) } }
        let client = try moto.client(bucket: bucket)

        let process = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", "s3://\(bucket)/u"], environment: env)
        #expect(process.status == 2, "\(process.stderr)")
        #expect(process.stderr.contains("does not honour conditional writes") && process.stderr.contains("If-None-Match: *"), "\(process.stderr)")
        #expect(process.stderr.contains(proxy.endpoint), "\(process.stderr)")
        #expect(process.stdout.isEmpty)
        let backfill = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/u", "--jobs", "2"], environment: env)
        #expect(backfill.status == 2 && backfill.stderr.contains("conditional writes"), "\(backfill.stderr)")
        try FileManager.default.createDirectory(atPath: up + "/incoming", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(Self.samples)/grey.jpg", toPath: up + "/incoming/a.jpg")
        let watch = try CloudCLI.run(["watch", up, "--store", "s3://\(bucket)/u"], environment: env)
        #expect(watch.status == 2 && watch.stderr.contains("conditional writes"), "\(watch.stderr)")
        #expect(FileManager.default.fileExists(atPath: up + "/incoming/a.jpg"))
        #expect(try client.list(prefix: "u/manifests/").isEmpty)
        #expect(proxy.stats.overwrites_accepted > 0)

        // The operator's opt-in: flag, environment or config file; a warning on every start.
        let flagged = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", "s3://\(bucket)/u", "--allow-unconditional-writes"], environment: env)
        #expect(flagged.status == 0, "\(flagged.stderr)")
        #expect(flagged.stderr.contains("conditional writes are not checked"), "\(flagged.stderr)")
        var optedIn = env
        optedIn["SNAPTHUMB_ALLOW_UNCONDITIONAL_WRITES"] = "true"
        let fromEnvironment = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/u", "--jobs", "2"], environment: optedIn)
        #expect(fromEnvironment.status == 0 && fromEnvironment.stderr.contains("conditional writes are not checked"), "\(fromEnvironment.stderr)")
        let config = up + "/config.json"
        try Data(#"{"store": {"allowUnconditionalWrites": true}}"#.utf8).write(to: URL(fileURLWithPath: config))
        let fromFile = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", "s3://\(bucket)/u", "--config", config], environment: env)
        #expect(fromFile.status == 0 && fromFile.stderr.contains("conditional writes are not checked"), "\(fromFile.stderr)")
    }

    @Test("the create-only probe costs one or two PUTs per store and process, none on a rerun, and verify counts its blob as SnapThumb's own")
    func probe() throws {
        let (moto, bucket) = try Moto.withBucket()
        let client = try moto.client(bucket: bucket)
        let store = S3Store(client: client)
        let start = client.requestsSent
        try store.proveConditionalWrites()
        try store.proveConditionalWrites()
        #expect(client.requestsSent - start == 2) // created, then refused
        let again = S3Store(client: try moto.client(bucket: bucket))
        try again.proveConditionalWrites()
        #expect(again.client.requestsSent == 1) // refused at once
        #expect(again.workerArgument.contains("create-only=proven"))
        try again.commit(try Self.upload("snaps/grey.jpg"))
        let verify = try CloudCLI.run(["verify", "s3://\(bucket)/"], environment: moto.environment())
        #expect(verify.status == 0 && !verify.stderr.contains("orphan"), "\(verify.stdout)\(verify.stderr)")
    }

    @Test("manifest GETs answered 200 with an empty body: never taken for 'no manifest'; other bytes are a conflict, the manifest stays")
    func emptyManifestBodies() throws {
        let (moto, bucket) = try Moto.withBucket()
        let tree = try S3CommandLineTests.uploadsTree()
        let other = Repo.tempDirectory()
        defer { for p in [tree, other] { try? FileManager.default.removeItem(atPath: p) } }
        let store = "s3://\(bucket)/e"
        #expect(try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: moto.environment()).status == 0)
        let client = try moto.client(bucket: bucket)
        func published() throws -> [String: Data] {
            var all: [String: Data] = [:]
            for object in try client.list(prefix: "e/manifests/") { all[object.key] = try client.get(object.key)?.body }
            return all
        }
        let before = try published()
        #expect(before.count == 6)

        let proxy = try FaultProxy(upstreamPort: moto.port, misbehaviour: ["--empty-get", "/manifests/"])
        let env = moto.environment(endpoint: proxy.endpoint)
        try FileManager.default.copyItem(atPath: "\(Self.samples)/phone-portrait.jpg", toPath: "\(other)/grey.jpg")
        try FileManager.default.createDirectory(atPath: "\(other)/u0", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(Self.samples)/phone-portrait.jpg", toPath: "\(other)/u0/grey.jpg")
        let process = try CloudCLI.run(["process", "\(other)/grey.jpg", "--store", store], environment: env)
        #expect(process.status == 0, "no manifest under grey.jpg yet: \(process.stderr)")
        let conflict = try CloudCLI.run(["backfill", other, "--store", store, "--jobs", "1"], environment: env)
        #expect(conflict.status == 1 && conflict.stderr.contains("cannot be read"), "\(conflict.stderr)")
        // A resumed backfill behind the same cache: nothing re-processed over what is published.
        let resumed = try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: env)
        #expect(resumed.status == 1 && resumed.stderr.contains("conflict=6"), "\(resumed.stderr)")
        #expect(proxy.stats.emptied > 0)
        var after = try published()
        #expect(after.removeValue(forKey: "e/manifests/grey.jpg.json") != nil)
        #expect(after == before)
    }

    /// Half the answers are damaged, but never more than 3 in a row for one object: with a
    /// bare 50 % all 6 of the client's reads of a blob came back damaged now and then (1 in
    /// 64 per blob; CI saw it once), and `unreadable` is then the right answer, not a bug.
    @Test("damaged reads are retried, never reported or acted on: flipped bytes in blobs (verify), cut bodies under their Content-Length (manifests)")
    func garbledReads() throws {
        let (moto, bucket) = try Moto.withBucket()
        let tree = try S3CommandLineTests.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        let store = "s3://\(bucket)/g"
        #expect(try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: moto.environment()).status == 0)

        let blobs = try FaultProxy(upstreamPort: moto.port, seed: 5, misbehaviour: ["--garble-get", "/blobs/", "--garble-rate", "0.5", "--garble-max-run", "3"])
        let verify = try CloudCLI.run(["verify", store], environment: moto.environment(endpoint: blobs.endpoint))
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(blobs.stats.garbled >= 2, "\(blobs.stats)")

        let manifests = try FaultProxy(upstreamPort: moto.port, seed: 5, misbehaviour: ["--garble-get", "/manifests/", "--garble-rate", "0.5", "--garble-mode", "cut", "--garble-max-run", "3"])
        let rerun = try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: moto.environment(endpoint: manifests.endpoint))
        #expect(rerun.status == 0 && rerun.stderr.contains("6 skipped"), "\(rerun.stderr)")
        let checked = try CloudCLI.run(["verify", store], environment: moto.environment(endpoint: manifests.endpoint))
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        #expect(manifests.stats.garbled >= 2, "\(manifests.stats)")
        #expect(manifests.stats.putCount == 0)
    }

    @Test("a server that never replaces under If-Match: a truthful refusal (not 'kept changing'), the manifest kept; watch fails the upload instead of retrying it for ever")
    func refusesReplacement() throws {
        let (moto, bucket) = try Moto.withBucket()
        let store = "s3://\(bucket)/r"
        let first = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", store], environment: moto.environment())
        #expect(first.status == 0, "\(first.stderr)")
        let client = try moto.client(bucket: bucket)
        let published = try #require(try client.get("r/manifests/grey.jpg.json")).body
        let proxy = try FaultProxy(upstreamPort: moto.port, misbehaviour: ["--refuse-if-match"])
        let env = moto.environment(endpoint: proxy.endpoint)
        let rederive = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", store, "--budget", "3000"], environment: env)
        #expect(rederive.status == 1, "\(rederive.stderr)")
        #expect(rederive.stderr.contains("refuses to replace") && rederive.stderr.contains("quoted and unquoted"), "\(rederive.stderr)")
        #expect(!rederive.stderr.contains("kept changing"))
        #expect(proxy.stats.if_match_refused == 2) // each spelling once
        #expect(try client.get("r/manifests/grey.jpg.json")?.body == published)

        let uploads = try S3WatchTests.Uploads()
        try uploads.drop("grey.jpg", from: "snaps/grey.jpg")
        var watchEnv = env
        watchEnv["SNAPTHUMB_BUDGET"] = "3000"
        let watch = try uploads.start(store: store, environment: watchEnv, log: uploads.root + "/w.log")
        defer { if watch.isRunning { kill(watch.processIdentifier, SIGKILL); watch.waitUntilExit() } }
        #expect(S3WatchTests.waitUntil(60) { uploads.names(in: "failed") == ["grey.jpg"] }, "\((try? String(contentsOfFile: uploads.root + "/w.log", encoding: .utf8)) ?? "")")
        watch.terminate()
        watch.waitUntilExit()
        #expect(try client.get("r/manifests/grey.jpg.json")?.body == published)
    }

    @Test("blobs are PUT once: uploads sharing blobs in one worker, and blobs a listing showed, are not PUT again")
    func blobsPutOnce() throws {
        let (moto, bucket) = try Moto.withBucket()
        let proxy = try FaultProxy(upstreamPort: moto.port)
        let env = moto.environment(endpoint: proxy.endpoint)
        let client = try moto.client(bucket: bucket)
        // Eight copies of one snap in one worker process: its 16 concurrent uploads share three blobs.
        let copies = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: copies) }
        for i in 0 ..< 8 { try FileManager.default.copyItem(atPath: "\(Self.samples)/grey.jpg", toPath: "\(copies)/c\(i).jpg") }
        let one = try CloudCLI.run(["backfill", copies, "--store", "s3://\(bucket)/b", "--jobs", "1"], environment: env)
        #expect(one.status == 0, "\(one.stderr)")
        let objects = try client.list(prefix: "b/").count
        #expect(objects == 8 + 3 + 1)
        #expect(proxy.stats.putCount == objects + 1, "\(proxy.stats.puts.filter { $0.value > 1 })") // the probe: created, then refused

        // The same snap under new keys, two workers: the parent's listing knows its blobs and tells both.
        let more = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: more) }
        for i in 0 ..< 6 { try FileManager.default.copyItem(atPath: "\(Self.samples)/grey.jpg", toPath: "\(more)/m\(i).jpg") }
        let start = proxy.stats.putCount
        let two = try CloudCLI.run(["backfill", more, "--store", "s3://\(bucket)/b", "--jobs", "2"], environment: env)
        #expect(two.status == 0, "\(two.stderr)")
        let blobPuts = proxy.stats.puts.filter { $0.key.contains("/blobs/") }.values.reduce(0, +)
        #expect(proxy.stats.putCount - start == 6 + 1, "\(proxy.stats.puts)") // six manifests and the probe, refused
        #expect(blobPuts == 3 + 3, "\(proxy.stats.puts)") // the first run's blobs and probe PUTs only
    }
}
