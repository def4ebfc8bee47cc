@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3
import VipsKit
import HTTPKit

/// The bucket backend against moto's S3 server (auth mode) on 127.0.0.1.
@Suite("S3 store", .serialized, .enabled(if: Repo.motoAvailable))
struct S3StoreTests {
    static func upload(_ sample: String, key: String? = nil, _ edit: (inout Settings) -> Void = { _ in }) throws -> ProcessedUpload {
        var settings = Settings()
        edit(&settings)
        let bytes = [UInt8](FileManager.default.contents(atPath: Repo.sample(sample))!)
        return try Pipeline(settings: settings).process(SourceBuffer(bytes), key: key ?? (sample as NSString).lastPathComponent)
    }

    @Test("commit: the same objects, byte for byte, as a directory store; a second commit is harmless")
    func sameBytesAsDirectory() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let s3 = S3Store(client: try moto.client(bucket: thumbs))
        let directory = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = try Store(root: directory)
        let upload = try Self.upload("snaps/phone-portrait.jpg", key: "u/1/phone.jpg")
        try s3.commit(upload)
        try s3.commit(upload)
        try disk.commit(upload)
        let client = try moto.client(bucket: thumbs)
        // Besides the directory store's files: the create-only probe, a blob of its own.
        let objects = try client.list(prefix: "").map(\.key).sorted().filter { !$0.hasSuffix(S3Store.probeHex) }
        #expect(objects.count == upload.blobs.count + 1)
        for key in objects {
            let remote = try #require(try client.get(key)).body
            #expect(remote == FileManager.default.contents(atPath: "\(directory)/\(key)"), "\(key)")
        }
        #expect(try s3.manifest(for: "u/1/phone.jpg") == upload.manifest)
        #expect(try s3.manifest(for: "absent.jpg") == nil)
    }

    @Test("a prefix keeps the layout under it")
    func prefix() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let s3 = try S3Store.open("s3://\(thumbs)/a/b", environment: moto.environment())
        #expect(s3.location == "s3://\(thumbs)/a/b/")
        try s3.commit(try Self.upload("snaps/grey.jpg"))
        let keys = try moto.client(bucket: thumbs).list(prefix: "").map(\.key)
        #expect(keys.contains("a/b/manifests/grey.jpg.json"))
        #expect(keys.allSatisfy { $0.hasPrefix("a/b/blobs/sha256/") || $0.hasPrefix("a/b/manifests/") })
    }

    @Test("wrong secret or missing bucket: a config error at open, nothing written, no credential in the message")
    func accessCheck() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let wrong = "wrongSecretValue0123456789abcdefghijklmn"
        do {
            _ = try S3Store.open("s3://\(thumbs)/p", environment: moto.environment(secret: wrong))
            Issue.record("opened with a wrong secret")
        } catch let error as SnapError {
            #expect(error.code == .config)
            #expect(!error.message.contains(wrong) && !error.message.contains(moto.secretAccessKey) && !error.message.contains(moto.accessKeyID), "\(error.message)")
        }
        do {
            _ = try S3Store.open("s3://no-such-bucket/p", environment: moto.environment())
            Issue.record("opened a missing bucket")
        } catch let error as SnapError {
            #expect(error.code == .config)
            #expect(error.message.contains("no such bucket"))
        }
        // A write with the wrong secret is refused by the server (signatures are checked).
        let bad = S3Store(client: try moto.client(bucket: thumbs, secret: wrong))
        #expect(throws: SnapError.self) { try bad.commit(try Self.upload("snaps/grey.jpg")) }
        #expect(try moto.client(bucket: thumbs).list(prefix: "").isEmpty)
    }

    @Test("publishing is create-only: a new recipe replaces (logged), different source bytes are a conflict")
    func createOnly() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let s3 = S3Store(client: try moto.client(bucket: thumbs))
        let first = try Self.upload("snaps/grey.jpg", key: "k.jpg")
        try s3.commit(first)
        let other = try Self.upload("snaps/phone-portrait.jpg", key: "k.jpg")
        #expect(throws: SnapError.self) { try s3.commit(other) }
        do { try s3.commit(other) } catch let error as SnapError { #expect(error.code == .conflict) }
        #expect(try s3.manifest(for: "k.jpg") == first.manifest)

        let recipe = try Self.upload("snaps/grey.jpg", key: "k.jpg") { $0.square.qualityMax = 70 }
        #expect(recipe.manifest.recipe.digest != first.manifest.recipe.digest)
        try s3.commit(recipe)
        #expect(try s3.manifest(for: "k.jpg") == recipe.manifest)

        let replacing = S3Store(client: try moto.client(bucket: thumbs), onConflict: .replace)
        try replacing.commit(other)
        #expect(try s3.manifest(for: "k.jpg") == other.manifest)
    }

    @Test("a storm of 503 SlowDown and dropped connections loses nothing; no Expect: 100-continue")
    func faults() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let proxy = try FaultProxy(upstreamPort: moto.port, slowdown: 0.3, drop: 0.1, seed: 7)
        let s3 = S3Store(client: try moto.client(bucket: thumbs, endpoint: proxy.endpoint, retry: S3RetryPolicy(attempts: 12, base: 0.01, cap: 0.1),
                                                      timeouts: RequestTimeouts(idle: 5)), concurrency: 8)
        let samples = ["snaps/grey.jpg", "snaps/phone-portrait.jpg", "snaps/alpha.png", "snaps/adobe-rgb.jpg"]
        var uploads: [ProcessedUpload] = []
        for i in 0 ..< 12 { uploads.append(try Self.upload(samples[i % samples.count], key: "f/\(i).jpg")) }
        let failures = Failures()
        let committer: any UploadCommitter<Int> = s3.makeCommitter(maxDelay: 0) { i, _, error in
            if let error { failures.add("\(i): \(error)") }
        }
        for (i, upload) in uploads.enumerated() { committer.submit(upload, tag: i) }
        committer.finish()
        #expect(failures.all.isEmpty)
        let stats = proxy.stats
        #expect(stats.slowdowns > 0 && stats.drops > 0, "the proxy injected no faults: \(stats)")
        #expect(stats.expect_continue == 0)
        for (i, upload) in uploads.enumerated() {
            #expect(try S3Store(client: try moto.client(bucket: thumbs)).manifest(for: "f/\(i).jpg") == upload.manifest)
        }
    }

    @Test("a listing tells a backfill what exists: absent keys cost no request")
    func listingKnowsWhatExists() throws {
        let (moto, thumbs) = try Moto.withBucket()
        let client = try moto.client(bucket: thumbs)
        let s3 = S3Store(client: client)
        let upload = try Self.upload("snaps/grey.jpg", key: "a.jpg")
        try s3.commit(upload)
        let fresh = S3Store(client: try moto.client(bucket: thumbs))
        try fresh.prepareForBackfill()
        let before = fresh.client.requestsSent
        for i in 0 ..< 20 { #expect(fresh.isKnownAbsent("missing-\(i).jpg")) }
        #expect(!fresh.isKnownAbsent("a.jpg"))
        #expect(fresh.client.requestsSent == before)
        #expect(try fresh.manifest(for: "a.jpg") == upload.manifest)
        // Its blobs are known: committing it again under a new key costs one request (the manifest).
        let again = try Self.upload("snaps/grey.jpg", key: "b.jpg")
        try fresh.proveConditionalWrites()
        let start = fresh.client.requestsSent
        try fresh.commit(again)
        #expect(fresh.client.requestsSent - start == 1)
    }
}

final class Failures: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var all: [String] { lock.lock(); defer { lock.unlock() }; return list }
}
