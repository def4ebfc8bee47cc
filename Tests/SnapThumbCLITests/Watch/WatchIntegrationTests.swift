#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import SnapThumbTesting
import Testing
import SnapThumbCore
import VipsKit
@testable import SnapThumbWatch

/// Each test runs the real `snapthumb watch` on a temporary directory. Serialized:
/// the machine has two cores and each test runs worker processes of its own.
@Suite(.serialized) struct WatchIntegrationTests {
    @Test func renamedAndWrittenInPlaceFilesAreEachProcessedOnceWhenComplete() throws {
        let h = try WatchHarness()
        // The writers pause 200 ms between chunks; the settle window leaves a wide margin on a busy machine.
        let worker = try h.start(["--jobs", "2"], settle: "1500ms")
        var expected: [String: String] = [:]
        for i in 0..<5 {
            let bytes = try TestImages.jpeg(i)
            try h.drop("renamed-\(i).jpg", bytes)
            expected["renamed-\(i).jpg"] = TestImages.digest(bytes)
        }
        // Two writers in place: one keeps the file open between chunks, one reopens per chunk.
        let slow = [try TestImages.jpeg(100, width: 160, height: 120), try TestImages.jpeg(101, width: 160, height: 120)]
        // Created in place with open(2): FileManager.createFile writes a temporary file and
        // renames it in, which is the signal that an upload is complete. (This test only
        // passed while the worker started too slowly to see those renames.)
        let createInPlace = { (name: String) in close(open(h.incoming + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)) }
        _ = createInPlace("held.jpg")
        _ = createInPlace("reopened.jpg")
        let held = FileHandle(forWritingAtPath: h.incoming + "/held.jpg")!
        let chunks = 4
        for c in 0..<chunks {
            let parts = slow.map { bytes -> Data in
                let size = (bytes.count + chunks - 1) / chunks
                return Data(bytes[min(bytes.count, c * size)..<min(bytes.count, (c + 1) * size)])
            }
            held.write(parts[0])
            let reopened = FileHandle(forWritingAtPath: h.incoming + "/reopened.jpg")!
            reopened.seekToEndOfFile()
            reopened.write(parts[1])
            reopened.closeFile()
            usleep(200_000)
        }
        held.closeFile()
        expected["held.jpg"] = TestImages.digest(slow[0])
        expected["reopened.jpg"] = TestImages.digest(slow[1])

        eventually("all 7 uploads in done/") { h.uploads(in: "done").count == 7 }
        #expect(h.uploads(in: "done") == expected.keys.sorted())
        #expect(h.uploads(in: "failed").isEmpty)
        let store = try Store(root: h.store)
        for (key, digest) in expected {
            // The manifest describes the complete file, not a prefix taken mid-write.
            #expect(try store.manifest(for: key)?.source.digest == digest, "\(key)")
        }
        #expect(h.successes(in: [worker]) == expected.mapValues { _ in 1 })
    }

    @Test func badFilesAreQuarantinedWithAReadableRecordAndTheWorkerKeepsGoing() throws {
        let h = try WatchHarness()
        let worker = try h.start(["--worker-id", "tester"])
        try h.drop("text.jpg", Array("this is not an image".utf8))
        try h.drop("empty.jpg", [])
        let good = try TestImages.jpeg(1)
        try h.drop("truncated.jpg", Array(good.prefix(good.count / 2)))
        try h.drop("good.jpg", good)
        #expect(symlink("/etc/hostname", "\(h.incoming)/link.jpg") == 0)

        eventually("4 in failed/, 1 in done/") { h.uploads(in: "failed").count == 4 && h.uploads(in: "done").count == 1 }
        #expect(h.uploads(in: "failed") == ["empty.jpg", "link.jpg", "text.jpg", "truncated.jpg"])
        for name in h.uploads(in: "failed") {
            let data = try Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/\(name).error.json"))
            let record = try JSONDecoder().decode(ErrorRecord.self, from: data)
            #expect(record.key == name)
            #expect(ErrorCode(rawValue: record.code) != nil && !ErrorCode(rawValue: record.code)!.isTransient)
            #expect(!record.message.isEmpty)
            #expect(record.attempts == 1)
            #expect(record.worker == "tester")
            #expect(ISO8601DateFormatter().date(from: record.time) != nil)
        }
        // Still working after the failures.
        try h.drop("after.jpg", try TestImages.jpeg(2))
        eventually("a later upload is processed") { h.uploads(in: "done") == ["after.jpg", "good.jpg"] }
        #expect(worker.process.isRunning)
    }

    @Test func threeWorkersOnOneDirectoryProcessEachFileExactlyOnce() throws {
        let h = try WatchHarness()
        let images = try (0..<8).map { try TestImages.jpeg($0) }
        let names = (0..<300).map { String(format: "snap-%03d.jpg", $0) }
        // A tiny queue: most events find it full, so the rescans must find those files.
        let workers = try (0..<3).map { try h.start(["--jobs", "1", "--worker-id", "w\($0)", "--queue-capacity", "16"]) }
        for (i, name) in names.enumerated() { try h.drop(name, images[i % images.count]) }

        eventually("all 300 in done/", seconds: 120) { h.uploads(in: "done").count == 300 }
        #expect(h.uploads(in: "done") == names)
        #expect(h.uploads(in: "incoming").isEmpty)
        #expect(h.claimed().isEmpty)
        #expect(h.uploads(in: "failed").isEmpty)
        let successes = h.successes(in: workers)
        #expect(successes.count == 300)
        #expect(successes.values.allSatisfy { $0 == 1 }, "some upload was processed more than once")
        // The work really was shared.
        #expect(workers.filter { $0.logText.contains("snap.result=ok") }.count >= 2)
    }

    @Test func killNineMidBatchThenRestartAccountsForEveryFile() throws {
        let h = try WatchHarness()
        let images = try (0..<8).map { try TestImages.jpeg($0, width: 400, height: 300) }
        let names = (0..<150).map { String(format: "k-%03d.jpg", $0) }
        for (i, name) in names.enumerated() { try h.drop(name, images[i % images.count]) }
        let first = try h.start(["--jobs", "2"])
        eventually("some uploads done") { h.uploads(in: "done").count >= 10 }
        first.signal(SIGKILL)
        #expect(first.waitForExit(seconds: 30) != nil)
        // Its worker processes die with it (PR_SET_PDEATHSIG), as systemd kills the
        // whole unit: wait until they have, so the restart finds their temp files dead.
        eventually("the worker processes are gone") { h.processesUsingTheStore() == 0 }

        let orphaned = h.claimed()
        // Right after the crash every upload is in exactly one place.
        let keys = (h.uploads(in: "incoming") + h.claimed() + h.uploads(in: "done") + h.uploads(in: "failed"))
            .map { UploadName.parse($0).key }
        #expect(keys.sorted() == names)

        let second = try h.start(["--jobs", "2"])
        eventually("all 150 in done/", seconds: 120) { h.uploads(in: "done").count == 150 }
        #expect(h.uploads(in: "done") == names)
        if !orphaned.isEmpty { #expect(second.logText.contains("took over the claim of a dead worker")) }
        #expect(h.claimed().isEmpty && h.uploads(in: "incoming").isEmpty && h.uploads(in: "failed").isEmpty)
        #expect(h.tempFiles(under: h.store).isEmpty, "temp files left in the store: \(h.tempFiles(under: h.store))")
        // The dead worker's claim directory is gone.
        let claimDirs = try FileManager.default.contentsOfDirectory(atPath: h.uploads + "/processing")
        #expect(claimDirs == ["\(WorkerIdentity.hostname()).\(second.pid)"])
        #expect(try h.verifyStore() == 0)
    }

    @Test func sigtermWithWorkInFlightExitsZeroWithinTheDrainTimeoutAndLosesNothing() throws {
        let h = try WatchHarness()
        let images = try (0..<4).map { try TestImages.jpeg($0, width: 800, height: 600) }
        let names = (0..<100).map { String(format: "t-%03d.jpg", $0) }
        for (i, name) in names.enumerated() { try h.drop(name, images[i % images.count]) }
        let worker = try h.start(["--jobs", "2", "--drain-timeout", "20s"])
        eventually("some uploads done") { h.uploads(in: "done").count >= 5 }
        let inFlight = h.claimed()
        worker.signal(SIGTERM)
        let status = worker.waitForExit(seconds: 40)
        #expect(status == 0)
        #expect(worker.logText.contains("shutting down"))
        #expect(h.claimed().isEmpty)
        #expect((h.uploads(in: "incoming") + h.uploads(in: "done")).sorted() == names)
        #expect(h.uploads(in: "incoming").count > 0, "the backlog should not have been finished after SIGTERM")
        // What was in flight at the signal was finished, not handed back.
        #expect(Set(inFlight).isSubset(of: h.uploads(in: "done")), "in flight: \(inFlight)")
        let store = try Store(root: h.store)
        for name in h.uploads(in: "done") { #expect(try store.manifest(for: name) != nil) }
    }

    @Test func afterTheDrainTimeoutUnfinishedClaimsGoBackToIncoming() throws {
        let h = try WatchHarness()
        let images = try (0..<4).map { try TestImages.jpeg($0, width: 1600, height: 1200) }
        let names = (0..<40).map { String(format: "d-%03d.jpg", $0) }
        for (i, name) in names.enumerated() { try h.drop(name, images[i % images.count]) }
        let worker = try h.start(["--jobs", "2", "--drain-timeout", "0s"])
        eventually("work in flight") { h.uploads(in: "done").count >= 1 && !h.claimed().isEmpty }
        worker.signal(SIGINT)
        #expect(worker.waitForExit(seconds: 30) == 0)
        #expect(h.claimed().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: h.uploads + "/processing").isEmpty, "claim directory left behind")
        #expect((h.uploads(in: "incoming").map { UploadName.parse($0).key } + h.uploads(in: "done")).sorted() == names)
        // A restart finishes the rest.
        try h.start(["--jobs", "2"])
        eventually("all done after restart", seconds: 120) { h.uploads(in: "done") == names }
    }

    @Test func filesThatArriveWhileNoWorkerRunsAreFoundAtStart() throws {
        let h = try WatchHarness()
        for i in 0..<5 { try h.drop("early-\(i).jpg", try TestImages.jpeg(i)) }
        // (After an inotify overflow: HardeningWatchTests, with an injected fault.)
        try h.start(["--rescan-interval", "1h"])
        eventually("uploads made before the start are processed") { h.uploads(in: "done").count == 5 }
        #expect(h.uploads(in: "failed").isEmpty)
    }

    @Test func pollModeFindsUploadsWithoutInotify() throws {
        let h = try WatchHarness()
        let worker = try h.start(["--poll", "--poll-interval", "500ms"])
        for i in 0..<3 { try h.drop("p-\(i).jpg", try TestImages.jpeg(i)) }
        eventually("polled uploads are processed") { h.uploads(in: "done").count == 3 }
        #expect(worker.logText.contains("snap.mode=poll"))
    }

    @Test func aTransientlyUnwritableStoreQuarantinesNothingAndCatchesUpLater() throws {
        let h = try WatchHarness()
        let worker = try h.start()
        eventually("store created") { FileManager.default.fileExists(atPath: h.store + "/blobs/sha256") }
        // Root ignores permissions, so make the store unwritable by putting a file where a directory
        // must be. In one step (the two trade places): the worker processes open the store as they
        // start, and one that did so while blobs/ was briefly missing made a new, writable one.
        let swapped = h.store + "/blobs.swapped"
        #expect(FileManager.default.createFile(atPath: swapped, contents: Data("x".utf8)))
        #expect(POSIX.renameExchange(swapped, h.store + "/blobs") == 0)
        let names = (0..<5).map { "s-\($0).jpg" }
        for (i, name) in names.enumerated() { try h.drop(name, try TestImages.jpeg(i)) }

        // A transient failure, then another after the pause it caused; nothing quarantined meanwhile.
        func retries() -> Int { worker.logText.components(separatedBy: "snap.result=retry").count - 1 }
        eventually("a transient failure, and another after its backoff") { retries() >= 2 }
        #expect(h.uploads(in: "failed").isEmpty)
        #expect(h.uploads(in: "done").isEmpty)
        #expect(h.uploads(in: "incoming").count + h.claimed().count == 5)
        // Backoff, not spinning: a handful of retries by now, not thousands.
        #expect(retries() < 40, "\(retries()) retries")

        #expect(POSIX.renameExchange(swapped, h.store + "/blobs") == 0)
        #expect(unlink(swapped) == 0)
        eventually("everything processed once the store is writable") { h.uploads(in: "done") == names }
        #expect(h.uploads(in: "failed").isEmpty)
        #expect(h.successes(in: [worker]) == Dictionary(uniqueKeysWithValues: names.map { ($0, 1) }))
        #expect(try h.verifyStore() == 0)
    }

    @Test func deleteAfterSuccessRetentionAndTheMetricsTextfile() throws {
        let h = try WatchHarness()
        try FileManager.default.createDirectory(atPath: h.uploads + "/done", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: h.uploads + "/done/old.jpg", contents: Data("x".utf8))
        usleep(1_200_000)
        let metrics = h.root + "/snapthumb.prom"
        let worker = try h.start(["--after-success", "delete", "--done-retention", "1s", "--metrics-file", metrics, "--metrics-interval", "500ms"])
        try h.drop("gone.jpg", try TestImages.jpeg(1))
        try h.drop("bad.jpg", Array("nope".utf8))
        eventually("manifest published and source deleted") {
            (try? Store(root: h.store).manifest(for: "gone.jpg")) != nil && h.uploads(in: "incoming").isEmpty && h.claimed().isEmpty
        }
        #expect(!h.uploads(in: "done").contains("gone.jpg"), "the processed source is deleted")
        eventually("the old source in done/ expired") { h.uploads(in: "done").isEmpty }
        eventually("metrics written") {
            let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            return text.contains("snapthumb_watch_files_processed_total 1") && text.contains("snapthumb_watch_files_failed_total{code=\"unsupported\"} 1")
        }
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("snapthumb_watch_processing_seconds_bucket"))
        #expect(text.contains("snapthumb_watch_files_in_flight"))
        #expect(text.contains("snapthumb_watch_backlog_files"))
        #expect(text.contains("snapthumb_watch_bytes_written_total"))
        #expect(worker.process.isRunning)
    }

    @Test func configurationMistakesAreUsageErrorsWithASentence() throws {
        let h = try WatchHarness()
        let (status, output) = try ChildProcess.combined(WatchHarness.binary, ["watch", h.uploads],
                                                         environment: ["SNAPTHUMB_DRAIN_TIMEOUT": "a while"])
        #expect(status == 2)
        #expect(output.contains("no store given: pass --store <dir>, set SNAPTHUMB_STORE"))
    }
}
