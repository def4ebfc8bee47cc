#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbCore
@_spi(Testing) import SnapThumbRunner
@_spi(Testing) @testable import SnapThumbWatch
import VipsKit
import Logging
import ServiceLifecycleTestKit

@_spi(Testing) import SnapThumbTesting


/// Uploads that used to wedge the queue, names that are not UTF-8, and workers
/// killed from outside.
@Suite(.serialized) struct HardeningWatchTests {
    func record(_ h: WatchHarness, _ name: String) throws -> ErrorRecord {
        try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/\(name).error.json")))
    }

    /// Writes a file in place in incoming/ with open(2) and write(2) (no rename).
    func writeInPlace(_ h: WatchHarness, _ name: String, _ bytes: [UInt8]) {
        let fd = open("\(h.incoming)/\(name)", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = POSIX.writeAll(fd, bytes)
        close(fd)
    }

    /// Moves a file named by raw bytes into incoming/ (a Latin-1 name from an SMB share).
    func dropRaw(_ h: WatchHarness, _ name: [UInt8], _ bytes: [UInt8]) throws {
        let staging = "\(h.root)/staging/raw"
        try Data(bytes).write(to: URL(fileURLWithPath: staging))
        #expect(POSIX.rename(Array(staging.utf8), Array(h.incoming.utf8) + [0x2F] + name) == 0)
    }

    @Test func anUploadThatKeepsFailingDoesNotStarveOnesWrittenInPlace() throws {
        let h = try WatchHarness()
        // The store cannot take bounce.jpg's manifest (a directory is in its place): a
        // store-side error, transient, so bounce.jpg comes back again and again.
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests/bounce.jpg.json", withIntermediateDirectories: true)
        let worker = try h.start(["--jobs", "1"])
        try h.drop("bounce.jpg", try TestImages.jpeg(1))
        eventually("bounce.jpg failed transiently") { worker.logText.contains("snap.result=retry") }
        writeInPlace(h, "inplace.jpg", try TestImages.jpeg(2))
        // It used to wait behind bounce.jpg for as long as that kept coming back.
        eventually("the upload written in place is published", seconds: 20) { h.uploads(in: "done") == ["inplace.jpg"] }
        #expect(h.uploads(in: "failed").isEmpty)
        // (Two listings: it may move between them while it is retried.)
        eventually("bounce.jpg is back in incoming/ or claimed") { h.uploads(in: "incoming") + h.claimed() == ["bounce.jpg"] }
    }

    @Test func aFailingUploadWithALongNameIsQuarantinedUnderAShortenedName() throws {
        let h = try WatchHarness()
        try h.start()
        let long = String(repeating: "é", count: 120) + "x.jpg"  // 245 bytes: `.error.json` would not fit
        try h.drop(long, Array("not an image".utf8))
        try h.drop("good.jpg", try TestImages.jpeg(3))
        eventually("the long name is quarantined") { h.uploads(in: "failed").count == 1 }
        let name = try #require(h.uploads(in: "failed").first)
        #expect(name == Quarantine.failedName(for: long))
        #expect(name.utf8.count + ".error.json".utf8.count <= 255)
        #expect(name.hasSuffix("~" + SHA256.hex(Array(long.utf8)).prefix(16)))
        let r = try record(h, name)
        #expect(r.key == long && r.code == "unsupported")
        eventually("the good one is published") { h.uploads(in: "done") == ["good.jpg"] }
    }

    @Test func namesThatAreNotUTF8AreProcessedUnderTheirEscapedKey() throws {
        let h = try WatchHarness()
        let worker = try h.start()
        let image = try TestImages.jpeg(4)
        try dropRaw(h, Array("caf".utf8) + [0xE9] + Array(".jpg".utf8), image)
        try dropRaw(h, [0xFF, 0xFE], try TestImages.jpeg(5))
        // Escaped, 200 bytes of Latin-1 are 600: too long for a name, so quarantined.
        try dropRaw(h, [UInt8](repeating: 0xE9, count: 200), image)
        eventually("both published") { h.uploads(in: "done") == ["%FF%FE", "caf%E9.jpg"] }
        let store = try Store(root: h.store)
        #expect(try store.manifest(for: "caf%E9.jpg")?.source.digest == TestImages.digest(image))
        eventually("the overlong one is quarantined") { h.uploads(in: "failed").count == 1 }
        let name = try #require(h.uploads(in: "failed").first)
        let r = try record(h, name)
        #expect(r.code == "unsafe-name")
        #expect(r.key == String(repeating: "%E9", count: 200))
        var left: [[UInt8]] = []
        _ = POSIX.forEachEntry(in: h.incoming) { left.append($0.bytes); return true }
        #expect(left.isEmpty)
        #expect(worker.logText.contains("snap.key=caf%E9.jpg"))
    }

    /// Leaves claims of a worker that died (its pid is gone) holding `files`.
    func deadWorkerClaims(_ h: WatchHarness, _ files: [String: [UInt8]]) throws {
        let pid = try Fixtures.deadPID()
        let worker = "\(WorkerIdentity.hostname()).\(pid)"
        let dir = "\(h.uploads)/processing/\(worker)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Its lease names this host and its (dead) pid: a claim directory is taken over only on a lease.
        let lease = #"{"worker":"\#(worker)","host":"\#(WorkerIdentity.hostname())","pid":\#(pid)}"#
        try Data(lease.utf8).write(to: URL(fileURLWithPath: "\(dir)/.lease"))
        for (name, bytes) in files { try Data(bytes).write(to: URL(fileURLWithPath: "\(dir)/\(name)")) }
    }

    /// Runs `WatchService` in this process, with a fault plan for its isolated jobs,
    /// until `done` holds (or 60 s pass), then shuts it down gracefully.
    func watchInProcess(_ h: WatchHarness, faults: any RunFaults, imageTimeout: Double = 10,
                        logger: Logger = Logger(label: "watch-test"), rescanInterval: Double? = nil,
                        until done: () -> Bool) async throws {
        var config = WatchConfiguration(uploadDirectory: h.uploads, store: h.store)
        config.settle = 0.5
        config.jobs = 2
        config.imageTimeout = imageTimeout
        config.workerID = "in-process"
        if let rescanInterval { config.rescanInterval = rescanInterval }
        let service = WatchService(config: config, pipeline: try Pipeline(), registry: nil, logger: logger,
                                   workerExecutable: WatchHarness.binary, faults: faults)
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await service.run() }
                let deadline = Date().addingTimeInterval(60)
                while !done() && Date() < deadline { try await Task.sleep(nanoseconds: 100_000_000) }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
    }

    /// A claim taken over from a dead worker runs alone in a child process; that
    /// child dying (here SIGKILL, as from the OOM killer) while the daemon lives is
    /// evidence against the upload: the third time it is `poison`.
    @Test func anIsolatedJobThatDiesIsPoisonAfterThreeDeathsAndOthersPublish() async throws {
        let h = try WatchHarness()
        try deadWorkerClaims(h, ["bomb.jpg": try TestImages.jpeg(6), "innocent.jpg": try TestImages.jpeg(7)])
        try await watchInProcess(h, faults: KillWorker(onKeysEndingWith: "bomb.jpg")) {
            h.uploads(in: "failed") == ["bomb.jpg"] && h.uploads(in: "done") == ["innocent.jpg"]
        }
        #expect(h.uploads(in: "failed") == ["bomb.jpg"])
        let r = try record(h, "bomb.jpg")
        #expect(r.code == "poison" && r.attempts == 3)
        #expect(r.message.contains("signal 9"))
        #expect(h.uploads(in: "done") == ["innocent.jpg"])
        #expect(h.claimed().isEmpty)
    }

    /// A fresh upload that kills the worker process that runs it costs that upload
    /// one attempt per death, never the daemon: the third death makes it `poison`,
    /// and the uploads around it are published.
    @Test func aWorkerThatDiesOnAnUploadCostsThatUploadAnAttemptNeverTheDaemon() async throws {
        let h = try WatchHarness()
        try h.drop("bomb.jpg", try TestImages.jpeg(6))
        for i in 0..<4 { try h.drop("fine-\(i).jpg", try TestImages.jpeg(30 + i)) }
        let counts = CountDispatches(then: KillWorker(onKeysEndingWith: "bomb.jpg"))
        try await watchInProcess(h, faults: counts) {
            h.uploads(in: "failed") == ["bomb.jpg"] && h.uploads(in: "done").count == 4
        }
        let r = try record(h, "bomb.jpg")
        #expect(r.code == "poison" && r.attempts == 3)
        #expect(counts.count("bomb.jpg") == 3)
        #expect(h.uploads(in: "done") == (0..<4).map { "fine-\($0).jpg" })
        #expect(h.claimed().isEmpty)
    }

    /// An image that never finishes is stopped at the time limit (its worker process
    /// is killed): that upload is `timeout`, the daemon goes on (it used to exit 70).
    @Test func anUploadThatNeverFinishesIsTimeoutAndTheDaemonGoesOn() async throws {
        // The limit also bounds fine.jpg in a freshly started worker: generous, so that a
        // loaded machine (the whole suite runs in parallel) cannot time it out too.
        let h = try WatchHarness()
        try h.drop("stuck.jpg", try TestImages.jpeg(2))
        try h.drop("fine.jpg", try TestImages.jpeg(1))
        try await watchInProcess(h, faults: StopWorker(onKeysEndingWith: "stuck.jpg"), imageTimeout: 5) {
            h.uploads(in: "failed") == ["stuck.jpg"] && h.uploads(in: "done") == ["fine.jpg"]
        }
        #expect(try record(h, "stuck.jpg").code == "timeout")
        #expect(h.uploads(in: "done") == ["fine.jpg"])
        #expect(h.claimed().isEmpty)
    }

    @Test func filesThatArriveAfterAnEventOverflowAreRescanned() async throws {
        let h = try WatchHarness()
        for i in 0..<5 { try h.drop("early-\(i).jpg", try TestImages.jpeg(i)) }
        let log = CapturedLog()
        var dropped = false
        // Every inotify batch is replaced by an overflow: only rescans can find files.
        try await watchInProcess(h, faults: OverflowInotify(), logger: log.logger, rescanInterval: 3600) {
            if !dropped, h.uploads(in: "done").count == 5 {
                dropped = true
                for i in 0..<5 { try? h.drop("late-\(i).jpg", try TestImages.jpeg(10 + i)) }
            }
            return h.uploads(in: "done").count == 10
        }
        #expect(h.uploads(in: "done").count == 10)
        #expect(log.text.contains("inotify queue overflowed"))
        #expect(h.uploads(in: "failed").isEmpty)
    }

    /// The image time limit bounds an isolated job too: a child that never finishes is killed.
    @Test func anIsolatedJobThatNeverFinishesIsKilledAtTheTimeLimit() async throws {
        let h = try WatchHarness()
        try deadWorkerClaims(h, ["stuck.jpg": try TestImages.jpeg(8)])
        try await watchInProcess(h, faults: StopWorker(onKeysEndingWith: "stuck.jpg"), imageTimeout: 0.5) {
            h.uploads(in: "failed") == ["stuck.jpg"]
        }
        #expect(try record(h, "stuck.jpg").code == "timeout")
    }

    /// SIGKILL of the whole daemon says nothing about the uploads in flight: they
    /// used to count an attempt each time and end as `poison`.
    @Test func killingTheDaemonRepeatedlyNeverMakesValidUploadsPoison() throws {
        let h = try WatchHarness()
        var names: [String] = []
        for i in 0..<4 {
            let name = "slow-\(i).jpg"
            try h.drop(name, try TestImages.jpeg(20 + i, width: 1600, height: 1200))
            names.append(name)
        }
        var kills = 0
        for _ in 0..<8 {
            let worker = try h.start(["--jobs", "2", "--worker-id", "w"])
            // Kill it as soon as it holds something (or give up on this round).
            let deadline = Date().addingTimeInterval(20)
            while h.claimed().isEmpty && Date() < deadline && worker.process.isRunning { usleep(2_000) }
            worker.signal(SIGKILL)
            _ = worker.waitForExit(seconds: 10)
            if !h.claimed().isEmpty { kills += 1 }
            if h.uploads(in: "done").count == names.count { break }
        }
        // Three kills with an upload in flight used to make it poison.
        #expect(kills >= 3)
        let last = try h.start(["--jobs", "2", "--worker-id", "w"])
        eventually("every upload published") { h.uploads(in: "done") == names }
        #expect(h.uploads(in: "failed").isEmpty)
        #expect(last.process.isRunning)
    }
}
