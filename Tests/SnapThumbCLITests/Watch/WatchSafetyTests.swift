#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
import SnapThumbCore
@testable import SnapThumbWatch

/// Issue 13: `watch` touches only what is its own, never overwrites an upload, and
/// refuses operator mistakes before any work.
@Suite(.serialized) struct WatchSafetyTests {

    @Test func cleanUpRemovesOnlyItsOwnTempNamesAndNeverRecursesIntoTheMetricsDirectory() throws {
        let h = try WatchHarness()
        let dead = try Fixtures.deadPID()
        let textfiles = "\(h.root)/textfiles"
        try FileManager.default.createDirectory(atPath: "\(textfiles)/other-tool", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests", withIntermediateDirectories: true)
        func plant(_ path: String) { FileManager.default.createFile(atPath: path, contents: Data("decoy".utf8)) }
        // Ours, left by a dead process: these go.
        let ours = ["\(textfiles)/.tmp-\(dead)-3-snapthumb.prom", "\(h.store)/manifests/.tmp-\(dead)-7-a.jpg.json"]
        // Not ours (another program's names, or our pattern for another file, or a sub-folder): these stay.
        let decoys = [
            "\(textfiles)/.tmp-99999-foo", "\(textfiles)/.tmp-\(dead)-foo", "\(textfiles)/.tmp-\(dead)-1-node.prom",
            "\(textfiles)/other-tool/.tmp-\(dead)-3-snapthumb.prom", "\(textfiles)/node.prom",
            "\(h.store)/.tmp-\(dead)-notes", "\(h.store)/manifests/.tmp-x",
        ]
        for path in ours + decoys { plant(path) }

        let worker = try h.start(["--metrics-file", "\(textfiles)/snapthumb.prom", "--metrics-interval", "200ms"])
        eventually("the metrics file is written") { FileManager.default.fileExists(atPath: "\(textfiles)/snapthumb.prom") }
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0)
        for path in decoys { #expect(FileManager.default.fileExists(atPath: path), "\(path) is not SnapThumb's and must survive") }
        for path in ours { #expect(!FileManager.default.fileExists(atPath: path), "\(path) is a stale temp file of ours") }
    }

    @Test func aKeyAgainWithOtherBytesIsQuarantinedAsConflictAndTheSameBytesAreARepeat() throws {
        let h = try WatchHarness()
        let first = try TestImages.jpeg(1), other = try TestImages.jpeg(2)
        let worker = try h.start()
        try h.drop("m1.jpg", first)
        eventually("the first upload is done") { h.uploads(in: "done") == ["m1.jpg"] }
        let manifestPath = "\(h.store)/manifests/m1.jpg.json"
        let published = try Data(contentsOf: URL(fileURLWithPath: manifestPath))

        try h.drop("m1.jpg", other)
        eventually("the conflicting upload is quarantined") { h.uploads(in: "failed") == ["m1.jpg"] }
        let record = try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/m1.jpg.error.json")))
        #expect(record.code == "conflict")
        #expect(record.message.contains(TestImages.digest(first)) && record.message.contains(TestImages.digest(other)))
        #expect(try Data(contentsOf: URL(fileURLWithPath: manifestPath)) == published, "the first manifest stays")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/done/m1.jpg"))) == first, "its source stays")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/m1.jpg"))) == other)

        // The same bytes again: a repeat, and done/ keeps both files.
        try h.drop("m1.jpg", first)
        eventually("the repeat is done under a distinct name") { h.uploads(in: "done") == ["m1.jpg", "m1~2.jpg"] }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/done/m1.jpg"))) == first)
        #expect(worker.logText.contains("snap.result=repeat"))
        // Another conflict with the same name: failed/ never overwrites either.
        try h.drop("m1.jpg", try TestImages.jpeg(3))
        eventually("a second conflict gets its own name in failed/") { h.uploads(in: "failed") == ["m1.jpg", "m1~2.jpg"] }
        #expect(FileManager.default.fileExists(atPath: "\(h.uploads)/failed/m1~2.jpg.error.json"))
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0)
        #expect(try h.verifyStore() == 0)
    }

    @Test func onConflictReplaceFromTheEnvironmentPublishesTheNewBytesAndLogsBothDigests() throws {
        let h = try WatchHarness()
        let first = try TestImages.jpeg(4), other = try TestImages.jpeg(5)
        let worker = try h.start(environment: ["SNAPTHUMB_ON_CONFLICT": "replace"])
        try h.drop("r.jpg", first)
        eventually("the first upload is done") { h.uploads(in: "done") == ["r.jpg"] }
        try h.drop("r.jpg", other)
        eventually("the second upload is done") { h.uploads(in: "done").count == 2 }
        let manifest = try #require(try Store(root: h.store).manifest(for: "r.jpg"))
        #expect(manifest.source.digest == TestImages.digest(other))
        #expect(worker.logText.contains("snap.previous_digest=\(TestImages.digest(first))"))
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0)
    }

    @Test func aMissingUploadDirectoryIsAStartUpError() throws {
        let h = try WatchHarness()
        let missing = "\(h.root)/no-such-dir"
        func run(_ arguments: [String]) throws -> (Int32?, String) {
            let worker = try WatchHarness.launch(arguments, log: "\(h.root)/start.log")
            let status = worker.waitForExit(seconds: 30)
            if status == nil { worker.signal(SIGKILL); _ = worker.waitForExit(seconds: 10) }
            return (status, worker.logText)
        }
        let (status, message) = try run(["watch", missing, "--store", h.store])
        #expect(status == 2)
        #expect(message.contains("--create"))
        #expect(!FileManager.default.fileExists(atPath: missing), "nothing is created without --create")

        let created = try h.startElsewhere(missing)
        eventually("--create makes the upload directory") { FileManager.default.fileExists(atPath: "\(missing)/incoming") }
        created.signal(SIGTERM)
        #expect(created.waitForExit(seconds: 60) == 0)
    }

    /// Issue 28: the shipped unit lists node_exporter's textfile directory as optional; a host
    /// without it must not restart-loop the worker.
    @Test func aMissingMetricsDirectoryIsWarnedOnceAndTheWorkerRuns() throws {
        let h = try WatchHarness()
        let missing = "\(h.root)/no-textfile-dir"
        let worker = try h.start(["--metrics-file", "\(missing)/snapthumb.prom", "--metrics-interval", "200ms"])
        try h.drop("a.jpg", TestImages.jpeg(1))
        eventually("the upload is processed") { FileManager.default.fileExists(atPath: "\(h.store)/manifests/a.jpg.json") }
        try h.drop("b.jpg", TestImages.jpeg(2))
        eventually("the second upload is processed") { FileManager.default.fileExists(atPath: "\(h.store)/manifests/b.jpg.json") }
        #expect(worker.process.isRunning)
        let warnings = worker.logText.split(separator: "\n").filter { $0.contains("metrics file") && $0.contains("does not exist") }
        #expect(warnings.count == 1, "\(worker.logText)")
        #expect(!FileManager.default.fileExists(atPath: missing), "the directory is not created")
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0)
    }
}

extension WatchHarness {
    /// `snapthumb watch <dir> --create` on another upload directory, same store.
    func startElsewhere(_ directory: String) throws -> Worker {
        try Self.launch(["watch", directory, "--create", "--store", store, "--worker-id", "elsewhere"], log: "\(root)/elsewhere.log")
    }
}
