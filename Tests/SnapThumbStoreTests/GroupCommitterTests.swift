@testable import SnapThumbStore
import Foundation
import SystemKit
@_spi(Testing) import SnapThumbTesting
import Synchronization
import Testing
@testable import SnapThumbCore

/// The group committer wakes its thread only when an upload starts a batch or fills one
/// (issue 41): these hold it to committing full batches at once, batching what arrives while
/// it gathers, and reporting every upload exactly once, durable, after the sync that follows
/// its manifest's placing.
@Suite("Group commit")
struct GroupCommitterTests {
    private final class Reports: Sendable {
        let done = Mutex<[String: Int]>([:])
        let failures = Mutex<[String]>([])
        let arrived = DispatchSemaphore(value: 0)
    }

    private func uploads(_ count: Int) throws -> [ProcessedUpload] {
        let pipeline = try Fixtures.pipeline()
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/grey.jpg"))
        return try (0..<count).map { try pipeline.process(SourceBuffer(bytes), key: "k\($0).jpg") }
    }

    @Test("a full batch is committed without waiting for the delay, and reported after the next batch's sync")
    func fullBatches() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let reports = Reports()
        // An hour's delay: only a full batch (two uploads) can make the committer commit.
        let committer = GroupCommitter<String>(store: store, maxBatch: 2, maxDelay: 3600) { key, _, error in
            if let error { reports.failures.withLock { $0.append("\(key): \(error)") } }
            reports.done.withLock { $0[key, default: 0] += 1 }
            reports.arrived.signal()
        }
        let all = try uploads(5)
        for upload in all.prefix(4) { committer.submit(upload, tag: upload.manifest.key) }
        // The second full batch's sync confirms the first batch: k0 and k1 are reported
        // although the delay is far from over. (A generous guard against a hang, not a timing.)
        for _ in 0..<2 { #expect(reports.arrived.wait(timeout: .now() + 300) == .success) }
        #expect(reports.done.withLock { $0 } == ["k0.jpg": 1, "k1.jpg": 1])
        for key in ["k0.jpg", "k1.jpg", "k2.jpg", "k3.jpg"] {
            #expect(try store.manifest(for: key) != nil, "\(key) is placed")
        }
        // One more upload starts a batch that only `finish` ends; every upload is reported once.
        committer.submit(all[4], tag: all[4].manifest.key)
        #expect(try store.manifest(for: "k4.jpg") == nil, "a batch of one waits for the delay")
        committer.finish()
        #expect(reports.done.withLock { $0 } == Dictionary(uniqueKeysWithValues: all.map { ($0.manifest.key, 1) }))
        #expect(reports.failures.withLock { $0 } == [])
        for upload in all { #expect(try store.manifest(for: upload.manifest.key) == upload.manifest) }
    }

    @Test("uploads that arrive while a batch gathers are committed with it")
    func gathering() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let reports = Reports()
        let committer = GroupCommitter<String>(store: store, maxBatch: 64, maxDelay: 3600) { key, _, error in
            if let error { reports.failures.withLock { $0.append("\(key): \(error)") } }
            reports.done.withLock { $0[key, default: 0] += 1 }
        }
        let all = try uploads(3)
        for upload in all { committer.submit(upload, tag: upload.manifest.key) }
        // Nothing is full and the delay is an hour: nothing is placed until flush.
        #expect(try all.allSatisfy { try store.manifest(for: $0.manifest.key) == nil })
        committer.flush()
        committer.finish()
        #expect(reports.done.withLock { $0 } == ["k0.jpg": 1, "k1.jpg": 1, "k2.jpg": 1])
        #expect(reports.failures.withLock { $0 } == [])
    }

    @Test("a lone upload is committed once the delay has passed, with nothing else arriving (a daemon's case)")
    func lone() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let reports = Reports()
        let committer = GroupCommitter<String>(store: store, maxBatch: 64, maxDelay: 0.01) { key, _, error in
            if let error { reports.failures.withLock { $0.append("\(key): \(error)") } }
            reports.done.withLock { $0[key, default: 0] += 1 }
            reports.arrived.signal()
        }
        // The committer is asleep with nothing queued: the upload must wake it.
        let upload = try uploads(1)[0]
        committer.submit(upload, tag: upload.manifest.key)
        // Reported after the sync that follows its placing, with no flush and no other upload.
        // (A generous guard against a hang, not a timing.)
        #expect(reports.arrived.wait(timeout: .now() + 300) == .success)
        #expect(try store.manifest(for: upload.manifest.key) == upload.manifest)
        committer.finish()
        #expect(reports.done.withLock { $0 } == ["k0.jpg": 1])
        #expect(reports.failures.withLock { $0 } == [])
    }
}
