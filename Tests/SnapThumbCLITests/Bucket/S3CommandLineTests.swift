@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3
import SnapThumbRunner
import VipsKit

/// The built `snapthumb` against moto's S3 server (auth mode) on 127.0.0.1.
@Suite("S3 command line", .serialized, .enabled(if: Repo.motoAvailable))
struct S3CommandLineTests {
    static let samples = Repo.sample("snaps")

    /// A small tree of uploads: a few snaps under two sub-directories.
    static func uploadsTree() throws -> String {
        let root = Repo.tempDirectory("snapthumb-s3-uploads")
        let names = ["grey.jpg", "phone-portrait.jpg", "alpha.png", "adobe-rgb.jpg", "gps-tagged.jpg", "display-p3.jpg"]
        for (i, name) in names.enumerated() {
            let directory = "\(root)/u\(i % 2)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: "\(samples)/\(name)", toPath: "\(directory)/\(name)")
        }
        return root
    }

    @Test("process, backfill and verify round trip; the bucket holds the directory store's bytes")
    func roundTrip() throws {
        let (moto, bucket) = try Moto.withBucket()
        let env = moto.environment()
        let tree = try Self.uploadsTree()
        let directory = Repo.tempDirectory()
        defer { for p in [tree, directory] { try? FileManager.default.removeItem(atPath: p) } }

        let processed = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", "s3://\(bucket)/p"], environment: env)
        #expect(processed.status == 0, "\(processed.stderr)")
        #expect(try Manifest.decode(Data(processed.stdout.utf8)).key == "grey.jpg")

        let backfill = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/thumbs", "--jobs", "2"], environment: env)
        #expect(backfill.status == 0, "\(backfill.stderr)")
        #expect(backfill.stderr.contains("6 processed"))
        let local = try CloudCLI.run(["backfill", tree, "--store", directory, "--jobs", "2"])
        #expect(local.status == 0)

        // Same objects, same bytes, under the prefix.
        let client = try moto.client(bucket: bucket)
        // Besides the directory store's files: the create-only probe, a blob of its own.
        let objects = try client.list(prefix: "thumbs/").filter { !$0.key.hasSuffix(S3Store.probeHex) }
        let files = try FileManager.default.subpathsOfDirectory(atPath: directory).filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(directory)/\($0)", isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        #expect(Set(objects.map { String($0.key.dropFirst("thumbs/".count)) }) == Set(files))
        for object in objects {
            #expect(try client.get(object.key)?.body == FileManager.default.contents(atPath: "\(directory)/\(object.key.dropFirst("thumbs/".count))"), "\(object.key)")
        }

        // A re-run learns from listings what exists, and skips everything.
        let again = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/thumbs", "--jobs", "2"], environment: env)
        #expect(again.status == 0 && again.stderr.contains("6 skipped"), "\(again.stderr)")

        let verify = try CloudCLI.run(["verify", "s3://\(bucket)/thumbs"], environment: env)
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(verify.stderr.contains("6 manifests: ok"))
    }

    @Test("a new recipe replaces a published manifest, logged on stderr (stdout stays manifests only); different bytes are a conflict")
    func replaceAndConflict() throws {
        let (moto, bucket) = try Moto.withBucket()
        let env = moto.environment()
        let store = "s3://\(bucket)/r"
        let first = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", store], environment: env)
        #expect(first.status == 0)
        let second = try CloudCLI.run(["process", "\(Self.samples)/grey.jpg", "--store", store, "--quality-max", "70"], environment: env)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stderr.contains("replacing a published manifest") && second.stderr.contains("new recipe"), "\(second.stderr)")
        let lines = second.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let manifest = try Manifest.decode(Data(lines[0].utf8))
        #expect(try Manifest.decode(try #require(try moto.client(bucket: bucket).get("r/manifests/grey.jpg.json")).body) == manifest)

        // Other bytes under the same key (the file name): refused as a conflict, the first stays.
        let other = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: other) }
        try FileManager.default.copyItem(atPath: "\(Self.samples)/phone-portrait.jpg", toPath: "\(other)/grey.jpg")
        let conflict = try CloudCLI.run(["process", "\(other)/grey.jpg", "--store", store, "--quality-max", "70"], environment: env)
        #expect(conflict.status == 1)
        #expect(conflict.stderr.contains(": conflict: "), "\(conflict.stderr)")
        #expect(try Manifest.decode(try #require(try moto.client(bucket: bucket).get("r/manifests/grey.jpg.json")).body) == manifest)
        for text in [first.stderr, second.stderr, conflict.stderr] {
            #expect(!text.contains(moto.secretAccessKey) && !text.contains(moto.accessKeyID))
        }
    }

    @Test("verify catches a flipped byte and a missing blob (exit 1), and names orphans")
    func verifyDamage() throws {
        let (moto, bucket) = try Moto.withBucket()
        let env = moto.environment()
        let tree = try Self.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        #expect(try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/t", "--jobs", "2"], environment: env).status == 0)
        let client = try moto.client(bucket: bucket)
        let manifestKey = "t/manifests/u0/grey.jpg.json"
        let manifest = try Manifest.decode(try #require(try client.get(manifestKey)).body)
        let paths = manifest.variants.values.map(\.path).sorted()
        // Flip one byte of one blob, delete another.
        var bytes = [UInt8](try #require(try client.get("t/" + paths[0])).body)
        bytes[bytes.count / 2] ^= 0x01
        _ = try client.put("t/" + paths[0], body: bytes, contentType: "application/octet-stream")
        try client.delete("t/" + paths[1])
        _ = try client.put("t/blobs/sha256/00/" + String(repeating: "0", count: 64), body: [1], contentType: "application/octet-stream")
        let verify = try CloudCLI.run(["verify", "s3://\(bucket)/t"], environment: env)
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("s3://\(bucket)/t/\(paths[0]): content hashes to"), "\(verify.stdout)")
        #expect(verify.stdout.contains("points at a missing blob \(paths[1])"), "\(verify.stdout)")
        #expect(verify.stdout.contains("points at a damaged blob \(paths[0])"), "\(verify.stdout)")
    }

    @Test("a wrong secret or a missing bucket: exit 2, nothing written, no credential printed")
    func refused() throws {
        let (moto, bucket) = try Moto.withBucket()
        let tree = try Self.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        let wrong = "wrongSecretValueThatMustNeverBePrinted0123"
        for arguments in [["backfill", tree, "--store", "s3://\(bucket)/t"], ["process", "\(Self.samples)/grey.jpg", "--store", "s3://\(bucket)/t"],
                          ["verify", "s3://\(bucket)/t"]] {
            let result = try CloudCLI.run(arguments, environment: moto.environment(secret: wrong))
            #expect(result.status == 2, "\(arguments[0]): \(result.stderr)")
            for secret in [wrong, moto.secretAccessKey, moto.accessKeyID] {
                #expect(!result.stderr.contains(secret) && !result.stdout.contains(secret))
            }
        }
        #expect(try moto.client(bucket: bucket).list(prefix: "").isEmpty)
        // watch checks access before it claims anything.
        let up = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: up) }
        try FileManager.default.createDirectory(atPath: up + "/incoming", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(Self.samples)/grey.jpg", toPath: up + "/incoming/a.jpg")
        let watch = try CloudCLI.run(["watch", up, "--store", "s3://\(bucket)/t"], environment: moto.environment(secret: wrong))
        #expect(watch.status == 2, "\(watch.stderr)")
        #expect(FileManager.default.fileExists(atPath: up + "/incoming/a.jpg"))
        #expect(!watch.stderr.contains(wrong) && !watch.stderr.contains(moto.accessKeyID))
        let missing = try CloudCLI.run(["backfill", tree, "--store", "s3://no-such-bucket-here/t"], environment: moto.environment())
        #expect(missing.status == 2 && missing.stderr.contains("no such bucket"), "\(missing.stderr)")
    }

    @Test("anything that is neither a directory nor an s3:// URL is a usage error, and creates nothing")
    func usage() throws {
        let cwd = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: cwd) }
        for store in ["gs://bucket/x", "s3:bucket", "http://host/x", "s3://"] {
            let process = try SpawnedProcess(CLI.binary, ["process", "\(Self.samples)/grey.jpg", "--store", store], directory: cwd,
                                             stdout: .null, stderr: .null)
            #expect(process.wait().code == 2, "\(store)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: cwd).isEmpty)
        #expect(try CloudCLI.run(["verify", "ftp://x/y"]).status == 2)
        // watch: the flag, and the config file's watch.store.
        let up = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: up) }
        #expect(try CloudCLI.run(["watch", up, "--store", "gs://b/x"]).status == 2)
        let config = up + "/config.json"
        try Data(#"{"watch": {"store": "s3:thumbs"}}"#.utf8).write(to: URL(fileURLWithPath: config))
        let fromFile = try CloudCLI.run(["watch", up, "--config", config])
        #expect(fromFile.status == 2, "\(fromFile.stderr)")
        #expect(!FileManager.default.fileExists(atPath: up + "/incoming"))
        #expect(try CloudCLI.run(["backfill", Self.samples, "--store", "./x", "--shard", "2/2"]).status == 2)
    }

    @Test("backfill reads sources from a bucket prefix; --shard I/N splits the keys with no overlap")
    func bucketSourcesAndShards() throws {
        let (moto, bucket) = try Moto.withBucket()
        let env = moto.environment()
        let client = try moto.client(bucket: bucket)
        let names = ["grey.jpg", "phone-portrait.jpg", "alpha.png", "adobe-rgb.jpg", "gps-tagged.jpg", "display-p3.jpg"]
        for (i, name) in names.enumerated() {
            let bytes = [UInt8](FileManager.default.contents(atPath: "\(Self.samples)/\(name)")!)
            _ = try client.put("uploads/d\(i % 3)/\(name)", body: bytes, contentType: "application/octet-stream")
        }
        var keys: [Set<String>] = []
        for shard in ["0/2", "1/2"] {
            let result = try CloudCLI.run(["backfill", "s3://\(bucket)/uploads/", "--store", "s3://\(bucket)/thumbs", "--shard", shard, "--jobs", "2",
                                      "--print-manifests"], environment: env)
            #expect(result.status == 0, "\(result.stderr)")
            keys.append(Set(result.stdout.split(separator: "\n").compactMap { try? Manifest.decode(Data($0.utf8)).key }))
        }
        #expect(keys[0].isDisjoint(with: keys[1]))
        #expect(keys[0].union(keys[1]) == Set(names.enumerated().map { "d\($0.offset % 3)/\($0.element)" }))
        #expect(!keys[0].isEmpty && !keys[1].isEmpty)
        #expect(Shard("0/2")!.contains("d0/grey.jpg") == keys[0].contains("d0/grey.jpg"))
        #expect(try CloudCLI.run(["verify", "s3://\(bucket)/thumbs"], environment: env).status == 0)
    }

    @Test("a store failure that outlasts the retries: code store, exit 1; a re-run completes")
    func storeFailureThenRerun() throws {
        let (moto, bucket) = try Moto.withBucket()
        let tree = try Self.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        // Every PUT answered 503 SlowDown; listings (the start-up check) go through.
        let proxy = try FaultProxy(upstreamPort: moto.port, slowdown: 1, faultMethods: "PUT")
        var env = moto.environment(endpoint: proxy.endpoint)
        env["AWS_MAX_ATTEMPTS"] = "2"
        let report = Repo.tempDirectory() + "/report.json"
        let failed = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/t", "--jobs", "2", "--report", report], environment: env)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("failed by code: store=6"), "\(failed.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        #expect((json?["failedByCode"] as? [String: Int])?["store"] == 6)
        #expect(proxy.stats.slowdowns >= 6)
        let reportText = try String(contentsOfFile: report, encoding: .utf8)
        #expect(!reportText.contains(moto.secretAccessKey) && !reportText.contains(moto.accessKeyID))
        #expect(!failed.stderr.contains(moto.secretAccessKey) && !failed.stderr.contains(moto.accessKeyID))
        let rerun = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/t", "--jobs", "2"], environment: moto.environment())
        #expect(rerun.status == 0 && rerun.stderr.contains("6 processed"), "\(rerun.stderr)")
        #expect(try CloudCLI.run(["verify", "s3://\(bucket)/t"], environment: moto.environment()).status == 0)
    }

    @Test("a storm of 503s and dropped connections during a backfill: nothing lost; at most 5 requests per image")
    func backfillThroughFaults() throws {
        let (moto, bucket) = try Moto.withBucket()
        let tree = try Self.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        let clean = try FaultProxy(upstreamPort: moto.port)
        let fresh = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/clean", "--jobs", "2"], environment: moto.environment(endpoint: clean.endpoint))
        #expect(fresh.status == 0)
        // Start-up: one access check per process (parent, 2 workers), two listings, two probe PUTs.
        let perImage = Double(clean.stats.requests - 7) / 6
        #expect(perImage <= 5, "\(clean.stats)")

        let proxy = try FaultProxy(upstreamPort: moto.port, slowdown: 0.25, drop: 0.1, seed: 3)
        var env = moto.environment(endpoint: proxy.endpoint)
        env["AWS_MAX_ATTEMPTS"] = "12"
        let stormy = try CloudCLI.run(["backfill", tree, "--store", "s3://\(bucket)/t", "--jobs", "2"], environment: env)
        #expect(stormy.status == 0, "\(stormy.stderr)")
        #expect(proxy.stats.slowdowns > 0 && proxy.stats.drops > 0)
        #expect(try CloudCLI.run(["verify", "s3://\(bucket)/t"], environment: moto.environment()).status == 0)
        #expect(try moto.client(bucket: bucket).list(prefix: "t/manifests/").count == 6)
    }
}
