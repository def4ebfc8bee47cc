#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
import SystemKit
import Foundation
import Synchronization
import Testing
import SnapThumbTesting
import SnapThumbCore
@testable import SnapThumbWatch

/// Issue 43: a writer of the upload directory (any upload service) plants or swaps
/// symlinks where `processing/`, a claim folder, `done/` or `failed/` should be. The
/// daemon reaches those folders by descriptor, so nothing outside the upload directory
/// is moved, written or deleted; every upload still ends in `done/` or `failed/`.
@Suite(.serialized) struct UploadDirectoryAttackTests {

    /// Files outside the upload directory whose content, mtime and existence must survive.
    struct Canaries {
        let directory: String
        private var snapshot: [String: (bytes: Data, mtime: Double)] = [:]

        init(in root: String, names: [String]) throws {
            directory = "\(root)/outside"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for name in names {
                let path = "\(directory)/\(name)"
                try Data("canary \(name)\n".utf8).write(to: URL(fileURLWithPath: path))
                // An old mtime, so that any touch shows.
                var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
                utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
            }
            snapshot = Self.read(directory)
        }

        /// A snapshot of a folder as it is now.
        init(existing directory: String) {
            self.directory = directory
            snapshot = Self.read(directory)
        }

        private static func read(_ directory: String) -> [String: (bytes: Data, mtime: Double)] {
            var files: [String: (Data, Double)] = [:]
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                let path = "\(directory)/\(name)"
                var st = stat()
                guard lstat(path, &st) == 0, let bytes = FileManager.default.contents(atPath: path) else { continue }
                files[name] = (bytes, Double(st.st_mtim.tv_sec))
            }
            return files
        }

        /// Records an issue for every canary changed, removed or added.
        func expectIntact(sourceLocation: SourceLocation = #_sourceLocation) {
            let now = Self.read(directory)
            #expect(Set(now.keys) == Set(snapshot.keys), "the folder outside holds exactly the canaries", sourceLocation: sourceLocation)
            for (name, before) in snapshot {
                #expect(now[name]?.bytes == before.bytes, "\(name): content unchanged", sourceLocation: sourceLocation)
                #expect(now[name]?.mtime == before.mtime, "\(name): mtime unchanged", sourceLocation: sourceLocation)
            }
        }
    }

    private func lease(host: String, pid: Int32, worker: String) -> Data {
        Data(#"{"worker":"\#(worker)","host":"\#(host)","pid":\#(pid)}"#.utf8)
    }

    /// Item 1: `processing/<host>.<dead pid>` planted as a symlink to an outside folder,
    /// with a lease naming this host and a dead pid, a temp-like name and "uploads".
    @Test func aPlantedSymlinkClaimFolderIsNeverTakenOver() throws {
        let h = try WatchHarness()
        let dead = try Fixtures.deadPID()
        let host = WorkerIdentity.hostname()
        let worker = "\(host).\(dead)"
        var canaries = try Canaries(in: h.root, names: ["photo.jpg", "notes.txt", ".tmp-\(dead)-1-x"])
        try lease(host: host, pid: dead, worker: worker).write(to: URL(fileURLWithPath: "\(canaries.directory)/.lease"))
        try Data(try TestImages.jpeg(3)).write(to: URL(fileURLWithPath: "\(canaries.directory)/snap.jpg"))
        canaries = Canaries(existing: canaries.directory)
        try FileManager.default.createDirectory(atPath: "\(h.uploads)/processing", withIntermediateDirectories: true)
        #expect(symlink(canaries.directory, "\(h.uploads)/processing/\(worker)") == 0)
        let w = try h.start()
        try h.drop("good.jpg", try TestImages.jpeg(1))
        eventually("the good upload is processed") { h.uploads(in: "done") == ["good.jpg"] }
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        canaries.expectIntact()
        #expect(h.uploads(in: "failed").isEmpty)
        #expect(POSIX.status(Array("\(h.uploads)/processing/\(worker)".utf8))?.kind == .symbolicLink, "the planted link is left where it is")
        #expect(w.logText.contains("not a claim directory of this user"), "it says why it left the folder alone")
    }

    /// Item 2 at start: a folder that is a symlink is refused before any work (exit 2).
    @Test(arguments: ["done", "failed", "processing", "incoming"])
    func aFolderThatIsASymlinkAtStartIsRefusedWithExitTwo(folder: String) throws {
        let h = try WatchHarness()
        let canaries = try Canaries(in: h.root, names: ["keep.jpg"])
        try? FileManager.default.removeItem(atPath: "\(h.uploads)/\(folder)")
        #expect(symlink(canaries.directory, "\(h.uploads)/\(folder)") == 0)
        let w = try h.start()
        #expect(w.waitForExit(seconds: 30) == 2)
        #expect(w.logText.contains("\(folder) is a symbolic link"), "the error names the folder: \(w.logText)")
        canaries.expectIntact()
    }

    /// Item 2 while running: `done/` (then `failed/`) swapped for a symlink to an outside
    /// folder. Claiming stops with an error line and a metric; nothing goes outside; once
    /// the folder is put back, the waiting uploads are processed.
    @Test(arguments: ["done", "failed"])
    func aFolderSwappedForASymlinkWhileRunningStopsClaimsAndIsNeverFollowed(folder: String) throws {
        let h = try WatchHarness()
        let canaries = try Canaries(in: h.root, names: ["a.jpg", "b.jpg", "b.jpg.error.json"])
        let metrics = "\(h.root)/metrics.prom"
        let w = try h.start(["--metrics-file", metrics, "--metrics-interval", "1s"])
        try h.drop("a.jpg", try TestImages.jpeg(1))
        eventually("the first upload is processed") { h.uploads(in: "done") == ["a.jpg"] }
        // Swap: the real folder moves aside, a symlink takes its name.
        #expect(rename("\(h.uploads)/\(folder)", "\(h.uploads)/\(folder).real") == 0)
        #expect(symlink(canaries.directory, "\(h.uploads)/\(folder)") == 0)
        try h.drop("b.jpg", try TestImages.jpeg(2))
        try h.drop("bad.jpg", Array("not an image".utf8))
        eventually("claiming stops with an error line") { w.logText.contains("was replaced by a symbolic link") }
        eventually("the metric counts it") {
            ((try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "").contains("snapthumb_watch_folder_problems_total ")
                && !((try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "").contains("snapthumb_watch_folder_problems_total 0")
        }
        #expect(h.uploads(in: "incoming").sorted() == ["b.jpg", "bad.jpg"], "nothing is claimed meanwhile")
        canaries.expectIntact()
        // Put right: the uploads go on to their places.
        #expect(unlink("\(h.uploads)/\(folder)") == 0)
        #expect(rename("\(h.uploads)/\(folder).real", "\(h.uploads)/\(folder)") == 0)
        eventually("both end in their places") { h.uploads(in: "done") == ["a.jpg", "b.jpg"] && h.uploads(in: "failed") == ["bad.jpg"] }
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        canaries.expectIntact()
        #expect(h.claimed().isEmpty)
    }

    /// Item 2: `processing/` swapped while running; a clean SIGTERM leaves nothing claimed
    /// and nothing outside, with no contradictory lines.
    @Test func processingSwappedWhileRunningLosesNothing() throws {
        let h = try WatchHarness()
        let canaries = try Canaries(in: h.root, names: ["x.jpg"])
        let w = try h.start(["--worker-id", "w1"])
        try h.drop("a.jpg", try TestImages.jpeg(1))
        eventually("the first upload is processed") { h.uploads(in: "done") == ["a.jpg"] }
        #expect(rename("\(h.uploads)/processing", "\(h.uploads)/processing.real") == 0)
        #expect(symlink(canaries.directory, "\(h.uploads)/processing") == 0)
        for i in 0..<5 { try h.drop("u\(i).jpg", try TestImages.jpeg(10 + i)) }
        eventually("claiming stops") { w.logText.contains("processing was replaced by a symbolic link") }
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        canaries.expectIntact()
        #expect(h.uploads(in: "incoming").count == 5, "every upload is still in incoming/")
        #expect(!w.logText.contains("cannot return a claim"))
        // The real folder kept no claims either.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: "\(h.uploads)/processing.real")) ?? []
        #expect(left.isEmpty, "the claim folder was removed at the clean exit: \(left)")
    }

    /// Item 4: a directory where an upload's manifest goes is not the upload's fault, but
    /// it blocks it for good: bounded retries, then failed/ with the reason.
    @Test func aDirectoryWhereTheManifestGoesIsQuarantinedAfterBoundedRetries() throws {
        let h = try WatchHarness()
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests/blocked.jpg.json", withIntermediateDirectories: true)
        let w = try h.start(["--max-attempts", "2"])
        try h.drop("blocked.jpg", try TestImages.jpeg(4))
        try h.drop("fine.jpg", try TestImages.jpeg(5))
        eventually("the blocked upload ends in failed/") { h.uploads(in: "failed") == ["blocked.jpg"] }
        eventually("the other is processed") { h.uploads(in: "done") == ["fine.jpg"] }
        let record = try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/blocked.jpg.error.json")))
        #expect(record.message.contains("in the way"), "the reason says what blocks it: \(record.message)")
        #expect(record.message.contains("after 2 attempts"))
        #expect(w.logText.contains("attempt 1 of 2; retried"), "the first attempt was retried, not charged to the upload")
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        #expect(FileOps.status("\(h.store)/manifests/blocked.jpg.json")?.isDirectory == true, "what is not ours stays")
    }

    /// Item 4: a symlink inside the store for a moment is the store's condition: the
    /// upload is retried, and published once the store is put right.
    @Test func aTemporarySymlinkInsideTheStoreIsRetriedNotChargedToTheUpload() throws {
        let h = try WatchHarness()
        let canaries = try Canaries(in: h.root, names: ["keep.json"])
        let w = try h.start(["--max-attempts", "1000"])
        try h.drop("a.jpg", try TestImages.jpeg(1))
        eventually("the first upload is processed") { h.uploads(in: "done") == ["a.jpg"] }
        #expect(rename("\(h.store)/manifests", "\(h.store)/manifests.real") == 0)
        #expect(symlink(canaries.directory, "\(h.store)/manifests") == 0)
        try h.drop("b.jpg", try TestImages.jpeg(2))
        eventually("the upload is retried") { w.logText.contains("snap.key=b.jpg") && w.logText.contains("retried") }
        #expect(unlink("\(h.store)/manifests") == 0)
        #expect(rename("\(h.store)/manifests.real", "\(h.store)/manifests") == 0)
        eventually("then processed") { h.uploads(in: "done") == ["a.jpg", "b.jpg"] }
        #expect(h.uploads(in: "failed").isEmpty)
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        canaries.expectIntact()
    }

    /// Item 3: stale-temp clean-up never enters a folder that is a symlink, and removes
    /// by descriptor.
    @Test func staleTempCleanUpNeverFollowsASymlinkedFolder() throws {
        let h = try WatchHarness()
        let dead = try Fixtures.deadPID()
        let stale = ".tmp-\(dead)-1-a.jpg.json"
        let canaries = try Canaries(in: h.root, names: [stale])
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: "\(h.store)/manifests/\(stale)", contents: Data("ours".utf8))
        #expect(symlink(canaries.directory, "\(h.store)/linked") == 0)
        #expect(TempFiles.removeStale(under: h.store) == 1)
        #expect(!FileManager.default.fileExists(atPath: "\(h.store)/manifests/\(stale)"))
        canaries.expectIntact()
    }

    /// Items 2 and 3 under load: folders swapped for symlinks to outside copies in a loop
    /// while `watch` runs, for a bounded number of swaps. Nothing outside changes, and
    /// once the loop stops every upload ends in done/ or failed/.
    @Test func aSwapLoopAgainstWatchTouchesNothingOutsideAndLosesNothing() throws {
        let h = try WatchHarness()
        let dead = try Fixtures.deadPID()
        let names = ["a.jpg", "a.jpg.error.json", ".lease", ".tmp-\(dead)-1-a.jpg", ".tmp-\(dead)-2-a.jpg.error.json"]
        let canaries = try Canaries(in: h.root, names: names)
        let w = try h.start(["--jobs", "2", "--max-attempts", "1000"])
        // Swaps start once it runs (a symlink seen at start is refused with exit 2: another test).
        eventually("watch is running") { w.logText.contains("watching") }
        var dropped: [String] = []
        for i in 0..<24 {
            let name = i % 6 == 5 ? "bad-\(i).jpg" : "u-\(i).jpg"
            try h.drop(name, i % 6 == 5 ? Array("not an image \(i)".utf8) : try TestImages.jpeg(100 + i))
            dropped.append(name)
            let folder = ["done", "failed", "processing", "incoming"][i % 4]
            let real = "\(h.uploads)/\(folder).real"
            if rename("\(h.uploads)/\(folder)", real) == 0 {
                _ = symlink(canaries.directory, "\(h.uploads)/\(folder)")
                usleep(useconds_t(20_000 + (i % 3) * 30_000))
                _ = unlink("\(h.uploads)/\(folder)")
                _ = rename(real, "\(h.uploads)/\(folder)")
            }
            usleep(30_000)
        }
        eventually("every upload ends in done/ or failed/", seconds: 120) {
            Set(h.uploads(in: "done") + h.uploads(in: "failed")) == Set(dropped)
        }
        w.signal(SIGTERM)
        #expect(w.waitForExit(seconds: 30) == 0)
        canaries.expectIntact()
        #expect(h.uploads(in: "incoming").isEmpty)
        #expect(h.claimed().isEmpty)
        #expect(h.uploads(in: "failed").allSatisfy { $0.hasPrefix("bad-") }, "only the bad uploads failed: \(h.uploads(in: "failed"))")
    }

    /// Item 3 under load: a store folder swapped for a symlink to an outside folder
    /// holding same-named stale temp files while `backfill` runs its clean-up.
    @Test func aSwapLoopAgainstBackfillNeverDeletesOutside() throws {
        let h = try WatchHarness()
        let dead = try Fixtures.deadPID()
        let names = (0..<4).map { ".tmp-\(dead)-\($0)-x.jpg.json" }
        let canaries = try Canaries(in: h.root, names: names)
        let tree = "\(h.root)/tree"
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        try Data(try TestImages.jpeg(7)).write(to: URL(fileURLWithPath: "\(tree)/x.jpg"))
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests", withIntermediateDirectories: true)
        let stop = Mutex(false)
        let finished = DispatchSemaphore(value: 0)
        let manifests = "\(h.store)/manifests"
        let outside = canaries.directory
        let swapper = Thread {
            defer { finished.signal() }
            var i = 0
            while !stop.withLock({ $0 }) {
                // Our stale temps in the real folder, for the clean-up to find.
                for name in names { FileManager.default.createFile(atPath: "\(manifests)/\(name)", contents: Data()) }
                if rename(manifests, "\(manifests).real") == 0 {
                    _ = symlink(outside, manifests)
                    usleep(useconds_t(200 + (i % 7) * 300))
                    _ = unlink(manifests)
                    _ = rename("\(manifests).real", manifests)
                }
                i += 1
                usleep(500)
            }
        }
        swapper.start()
        for _ in 0..<100 {
            try SpawnedProcess(WatchHarness.binary, ["backfill", tree, "--store", h.store, "--jobs", "1", "--log-level", "error"],
                               stdout: .null, stderr: .null).wait()
        }
        stop.withLock { $0 = true }
        finished.wait()
        canaries.expectIntact()
    }
}

