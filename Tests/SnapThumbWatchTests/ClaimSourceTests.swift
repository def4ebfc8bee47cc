#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Prometheus
import Synchronization
import SystemKit
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import Testing
// ClaimSource, Processor, Candidates and Scanner are the watch daemon's inner parts, not API (the
// API is WatchService, run end to end in SnapThumbCLITests/Watch): the tests reach them here.
@testable import SnapThumbWatch

/// Watch's job source through its own API: claims handed to the runner under the runner's ids,
/// every verdict taken to the upload's place; the scanner feeding the candidates.
extension UploadDirectoryTests {
    /// A claim source over the folder, as WatchService builds it, and what it told the daemon.
    final class Source: Sendable {
        let source: ClaimSource
        let processor: Processor
        let candidates: Candidates
        let told = Told()

        /// What the processor told the daemon: pauses (code and name) and successes.
        final class Told: Sendable {
            let backoffs = Mutex<[String]>([])
            let successes = Mutex(0)
        }

        init(_ uploads: UploadDirectory, _ claims: Claims, store: String, logger: Logger) throws {
            candidates = Candidates(incoming: uploads.incoming, capacity: 16, settle: 0)
            let quarantine = Quarantine(uploads: uploads, logger: logger)
            let told = self.told
            processor = Processor(
                store: try Store(root: store), claims: claims, quarantine: quarantine, inFlight: InFlight(),
                metrics: WatchMetrics(registry: PrometheusCollectorRegistry()), config: WatchConfiguration(uploadDirectory: uploads.layout.root, store: store),
                logger: logger, backoff: { error, name in told.backoffs.withLock { $0.append("\(error.code.rawValue) \(name ?? "-")") } },
                succeeded: { told.successes.withLock { $0 += 1 } }, recheck: {})
            source = ClaimSource(candidates: candidates, processor: processor)
        }

        /// The next claim, as the runner takes it, under `id`.
        func take(_ id: Int) -> FileWalker.Entry? {
            if case .job(let entry) = source.next(waitingUpTo: 0, id: JobID(id)) { return entry }
            return nil
        }

        func conclude(_ id: Int, _ entry: FileWalker.Entry, _ outcome: JobOutcome, attempts: Int = 1) {
            processor.conclude(JobResult(entry: entry, outcome: outcome, milliseconds: 1, id: JobID(id), attempts: attempts))
        }
    }

    @Test func everyVerdictTakesTheClaimToItsPlaceByTheRunnersJobID() throws {
        let f = try Folder()
        let (uploads, claims) = try open(f)
        try FileManager.default.createDirectory(atPath: "\(f.root)/store", withIntermediateDirectories: true)
        let s = try Source(uploads, claims, store: "\(f.root)/store", logger: logger)
        let names = ["ok.jpg", "again.jpg", "busy.jpg", "bad.jpg", "bomb.jpg", "slow.jpg", "late.jpg"]
        for name in names {
            try f.write("up/incoming/\(name)")
            #expect(s.candidates.offer(name, complete: true))
        }
        var jobs: [String: (id: Int, entry: FileWalker.Entry)] = [:]
        for id in 1...names.count {
            let entry = try #require(s.take(10 * id))
            jobs[entry.relativePath] = (10 * id, entry)
        }
        #expect(Set(jobs.keys) == Set(names))
        #expect(f.names("up/processing/me") == ([".lease"] + names).sorted())
        #expect(s.take(99) == nil, "nothing more to claim")

        func end(_ name: String, _ outcome: JobOutcome, attempts: Int = 1) {
            s.conclude(jobs[name]!.id, jobs[name]!.entry, outcome, attempts: attempts)
        }
        end("ok.jpg", .processed([:]))
        end("again.jpg", .skipped)
        end("busy.jpg", .failed(SnapError(.store, "the store is full")))
        end("bad.jpg", .failed(SnapError(.corrupt, "broken")))
        end("bomb.jpg", .crashed(SnapError(.poison, "signal 9")), attempts: 3)
        end("slow.jpg", .timedOut(SnapError(.timeout, "slow")))
        end("late.jpg", .abandoned)
        // A result under an id the source never gave (or gave and saw concluded) moves nothing.
        s.conclude(12345, jobs["ok.jpg"]!.entry, .failed(SnapError(.corrupt, "not mine")))
        s.conclude(jobs["bad.jpg"]!.id, jobs["bad.jpg"]!.entry, .processed([:]))

        #expect(f.names("up/done") == ["again.jpg", "ok.jpg"])
        #expect(f.names("up/incoming") == ["busy.jpg", "late.jpg"], "transient and abandoned go back")
        #expect(f.names("up/failed") == ["bad.jpg", "bad.jpg.error.json", "bomb.jpg", "bomb.jpg.error.json", "slow.jpg", "slow.jpg.error.json"])
        #expect(f.names("up/processing/me") == [".lease"])
        func record(_ name: String) throws -> ErrorRecord {
            try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(f.uploads)/failed/\(name).error.json")))
        }
        #expect(try record("bad.jpg").code == "corrupt")
        let bomb = try record("bomb.jpg")
        #expect(bomb.code == "poison" && bomb.attempts == 3 && bomb.message.contains("alone 3 times (signal 9)"))
        #expect(try record("slow.jpg").code == "timeout")
        #expect(s.told.backoffs.withLock { $0 } == ["store busy.jpg"], "only the transient failure pauses claiming")
        #expect(s.told.successes.withLock { $0 } == 2)
    }

    @Test func theScannerOffersEveryUploadInIncomingAndRenamesNamesThatAreNotUTF8() throws {
        let f = try Folder()
        let (uploads, claims) = try open(f)
        try f.write("up/incoming/a.jpg")
        try f.write("up/incoming/b.png")
        try f.write("up/incoming/.partial.jpg")
        try f.write("up/incoming/c.jpg.part")
        // caf\xE9.jpg: Latin-1, as from an SMB share.
        let latin1 = (Array("\(f.uploads)/incoming/caf".utf8) + [0xE9] + Array(".jpg".utf8) + [0]).map { CChar(bitPattern: $0) }
        let fd = Glibc.open(latin1, O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0)
        close(fd)
        let candidates = Candidates(incoming: uploads.incoming, capacity: 16, settle: 0)
        let scanner = Scanner(uploads: uploads, claims: claims.claimDirectory, interval: 3600, candidates: candidates,
                              quarantine: Quarantine(uploads: uploads, logger: logger), worker: "me", logger: logger)
        scanner.request()
        var offered: [String] = []
        while offered.count < 3, let work = candidates.take() {
            if case .upload(let name) = work { offered.append(name) }
        }
        scanner.stop()
        #expect(offered.sorted() == ["a.jpg", "b.png", "caf%E9.jpg"])
        // Dot-files and names that say they are still being written stay where they are, unoffered.
        #expect(f.names("up/incoming") == [".partial.jpg", "a.jpg", "b.png", "c.jpg.part", "caf%E9.jpg"])
    }
}
