import Foundation
import SnapThumbCore
import SnapThumbStore
import SystemKit

/// The one job runner: runs jobs through `jobs` long-lived `snapthumb worker`
/// processes, which publish through their group commit. Backfill and bench feed it
/// a file list; the watch daemon feeds it claims as uploads arrive (a source
/// that blocks and ends only at shutdown).
///
/// Each worker gets up to `window` jobs ahead, so that it never waits for the
/// next one (backfill: 8; watch: 1 or 2, for latency). It says when it has
/// processed a job (`staged`) and again once that job is durable: only
/// unprocessed jobs count against the window, so a worker is never held up by its
/// own commits. A worker that dies is replaced; the jobs it held are retried one at
/// a time in a fresh worker, so that a job that crashes a worker on its own is
/// reported as `crashed` (`poison`) and the rest still go through. A job that
/// runs past its deadline has its worker killed and ends as `timedOut`; the other
/// jobs that worker held are simply dealt again. ``stop(drainDeadline:)`` ends a
/// run gracefully. Every job taken from the source is reported exactly once.
public final class ProcessPool: Sendable {
    /// How a worker is started: a process, or a loop on a thread of this one.
    public let launch: WorkerLaunch
    public let jobs: Int
    /// Jobs sent ahead to one worker that it has not processed yet: enough to
    /// cover a round trip through this process. (Counting jobs waiting for the
    /// group commit as well starved the workers at the end of every run, where a
    /// fair share of what is left is a few files and a commit takes 15–30 ms.)
    public let window: Int
    /// Seconds a worker may spend on one job, or nil for no limit. A job's clock
    /// starts when its worker can start it: when it is sent to a worker with
    /// nothing else to process, or when the answer for the job before it arrives.
    public let deadline: Double?
    /// How often a job that took down its worker while alone is run alone again
    /// before it is reported as `crashed`. Backfill gives it one more chance (an
    /// OOM kill may have hit the wrong process); watch reports at once and counts
    /// the attempt itself.
    public let loneCrashRetries: Int
    let faults: any RunFaults
    let interruption: Interruption
    /// Workers answer each published or repeated job with its manifest (`process` prints them).
    public let answersWithManifests: Bool
    /// What the store holds, passed on to every worker with its jobs (nil: not tracked).
    let ledger: BlobLedger?

    struct Item {
        /// The job's number in this run (`i` in the protocol).
        let index: Int
        /// The id its source was asked with.
        let id: JobID
        let entry: FileWalker.Entry
        /// Times it was held by a worker that died.
        var attempts: Int
    }

    /// What the supervisors share, behind one lock they also wait on.
    private struct Shared {
        /// Jobs to deal again (their worker was killed for another job's deadline).
        var queue: [Item] = []
        /// Jobs held by a worker that died: each goes alone to a fresh worker.
        var suspects: [Item] = []
        /// Taken from the source and not yet reported.
        var outstanding = 0
        var taken = 0
        /// The next id to offer the source (one per request, whether or not a job comes of it).
        var nextID = 0
        var sourceEnded = false
        var stopping = false
        var drainExpired = false
        /// Worker processes running now, for the drain deadline.
        var workers: [Int32: SpawnedProcess] = [:]
        /// Per supervisor: how many jobs its worker has been sent and not processed yet;
        /// nil once the supervisor has ended. A streaming source's job never goes to a
        /// worker that has one to process while another has none (see `take`).
        var unprocessedBySupervisor: [Int?] = []
        /// Whether every job there will ever be is reported.
        var isFinished: Bool { sourceEnded && outstanding == 0 }
    }
    private let shared = Monitor(Shared())

    public convenience init(executable: String, arguments: [String], jobs: Int, window: Int = 8, deadline: Double? = nil,
                            loneCrashRetries: Int = 1, interruption: Interruption = Interruption(), knownBlobs: [String]? = nil) {
        self.init(launch: .process(executable: executable, arguments: arguments), jobs: jobs, window: window, deadline: deadline,
                  loneCrashRetries: loneCrashRetries, interruption: interruption, knownBlobs: knownBlobs)
    }

    /// - Parameter answersWithManifests: workers answer each published or repeated
    ///   job with its manifest (`JobResult.manifestJSON`), for `process` to print.
    public convenience init(launch: WorkerLaunch, jobs: Int, window: Int = 8, deadline: Double? = nil,
                            loneCrashRetries: Int = 1, interruption: Interruption = Interruption(), knownBlobs: [String]? = nil,
                            answersWithManifests: Bool = false) {
        self.init(launch: launch, jobs: jobs, window: window, deadline: deadline, loneCrashRetries: loneCrashRetries,
                  faults: NoFaults(), interruption: interruption, knownBlobs: knownBlobs, answersWithManifests: answersWithManifests)
    }

    /// With faults injected by a test (`SnapThumbTesting`).
    @_spi(Testing) public init(launch: WorkerLaunch, jobs: Int, window: Int = 8, deadline: Double? = nil,
                               loneCrashRetries: Int = 1, faults: any RunFaults, interruption: Interruption = Interruption(),
                               knownBlobs: [String]? = nil, answersWithManifests: Bool = false) {
        self.faults = faults
        self.answersWithManifests = answersWithManifests
        ledger = knownBlobs.map(BlobLedger.init)
        self.interruption = interruption
        self.launch = launch
        self.jobs = max(1, jobs)
        self.window = max(1, window)
        self.deadline = deadline.map { max(0, $0) }
        self.loneCrashRetries = max(0, loneCrashRetries)
    }

    /// Runs every job `source` gives until it ends and every job is reported, or
    /// until the run is stopped (``stop(drainDeadline:)``, or `interruption`).
    /// `finish` is called once for every job taken, from supervisor threads.
    /// Throws if no worker process could be started while jobs were still to come.
    public func run(_ source: any JobSource, finish: @escaping @Sendable (JobResult) -> Void) throws {
        let supervisors = min(jobs, source.remaining ?? jobs)
        guard supervisors > 0 else { return }
        // Every supervisor counts as idle from the start, so that a job does not wait
        // behind another in a worker while a second worker is still starting.
        shared.withLock { $0.state.unprocessedBySupervisor = Array(repeating: 0, count: supervisors) }
        let group = DispatchGroup()
        for n in 0..<supervisors {
            group.enter()
            let thread = Thread { [self] in
                defer {
                    shared.withLock { locked in
                        locked.state.unprocessedBySupervisor[n] = nil
                        locked.broadcast()
                    }
                    group.leave()
                }
                supervise(n, source, finish: finish)
            }
            thread.name = "snapthumb-worker-supervisor-\(n)"
            thread.start()
        }
        group.wait()

        // A stopped run: what was taken and never finished is handed back.
        let (left, unfinished) = shared.withLock { locked in
            let left = locked.state.queue + locked.state.suspects
            locked.state.queue = []; locked.state.suspects = []
            locked.state.outstanding -= left.count
            return (left, !locked.state.sourceEnded && !isStopping(locked.state))
        }
        for item in left { finish(JobResult(entry: item.entry, outcome: .abandoned, milliseconds: 0, id: item.id)) }
        if unfinished { throw SnapError(.internal, "cannot start a worker process (\(launch))") }
    }

    /// Stops the run: no job is taken any more; jobs in flight finish. After
    /// `drainDeadline` seconds (nil: no limit) the workers still running are
    /// killed and their jobs reported as `abandoned`. Returns at once; ``run(_:finish:)``
    /// returns when the run has ended.
    public func stop(drainDeadline: Double? = nil) {
        shared.withLock { locked in
            locked.state.stopping = true
            locked.broadcast()
        }
        guard let drainDeadline else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, drainDeadline)) { [shared] in
            let running = shared.withLock { locked in
                locked.state.drainExpired = true
                return locked.state.workers
            }
            for worker in running.values { worker.signal(SIGKILL) }
        }
    }

    /// Whether new jobs must not start.
    private func isStopping(_ state: Shared) -> Bool { state.stopping || interruption.signal != nil }

    /// Whether the run is over for a supervisor: every job reported, or stopping.
    private var isOver: Bool { shared.withLock { $0.state.isFinished || isStopping($0.state) } }

    /// Keeps one worker process busy until no work is left, replacing it when it dies.
    private func supervise(_ slot: Int, _ source: any JobSource, finish: @escaping @Sendable (JobResult) -> Void) {
        while true {
            if isOver { return }
            do {
                try runWorker(slot, source, finish: finish)
            } catch {
                // Cannot even start a worker: fail what is left rather than spin
                // (all of a file list; a streaming source keeps its jobs).
                let left = shared.withLock { locked in
                    var left = locked.state.queue + locked.state.suspects
                    locked.state.queue = []; locked.state.suspects = []
                    if source.remaining != nil {
                        while true {
                            let id = JobID(locked.state.nextID)
                            locked.state.nextID += 1
                            guard case .job(let entry) = source.next(waitingUpTo: 0, id: id) else { break }
                            left.append(Item(index: locked.state.taken, id: id, entry: entry, attempts: 0))
                            locked.state.taken += 1; locked.state.outstanding += 1
                        }
                        locked.state.sourceEnded = true
                    }
                    locked.state.outstanding -= left.count
                    locked.broadcast()
                    return left
                }
                for item in left {
                    finish(JobResult(entry: item.entry, outcome: .failed(SnapError(.internal, "cannot start a worker process: \(error)")), milliseconds: 0, id: item.id))
                }
                return
            }
        }
    }

    /// Takes the next job for the worker of supervisor `slot`, which holds `held`
    /// jobs, `unprocessed` of them not yet processed: suspects go alone to a worker
    /// that holds nothing. Waits only when the worker holds nothing and there is
    /// nothing to give it yet.
    private func take(_ slot: Int, held: Int, unprocessed: Int, from source: any JobSource) -> Item? {
        shared.withLock { locked -> Item? in
            while true {
                if locked.state.isFinished || isStopping(locked.state) { return nil }
                if held == 0, let suspect = locked.state.suspects.popLast() { return suspect }
                // Streaming (watch): a worker with a job to process takes no other while
                // another worker has none; the idle one's supervisor is waiting on the
                // source and takes it at once. (It would otherwise wait behind this
                // worker's job, and a job that wedges this worker would take it along.)
                let others = locked.state.unprocessedBySupervisor
                if unprocessed > 0, source.remaining == nil,
                   others.indices.contains(where: { $0 != slot && others[$0] == 0 }) {
                    return nil
                }
                // No more than a fair share of what is left, so that the workers finish
                // together: a small run is not dealt out in windows to the first worker.
                if unprocessed > 0, let left = source.remaining, unprocessed > (locked.state.queue.count + left) / jobs { return nil }
                if let next = locked.state.queue.popLast() { return next }
                if !locked.state.sourceEnded {
                    // The source may block: ask it without the lock (a worker that holds
                    // jobs only takes one that is ready now).
                    let id = JobID(locked.state.nextID)
                    locked.state.nextID += 1
                    let next = locked.unlocked { source.next(waitingUpTo: held > 0 ? 0 : 0.2, id: id) }
                    switch next {
                    case .job(let entry):
                        let item = Item(index: locked.state.taken, id: id, entry: entry, attempts: 0)
                        locked.state.taken += 1
                        locked.state.outstanding += 1
                        // Stopped meanwhile: it is handed back as abandoned when the run ends.
                        if isStopping(locked.state) { locked.state.queue.append(item); return nil }
                        return item
                    case .ended:
                        locked.state.sourceEnded = true
                        locked.broadcast()
                    case .notYet:
                        if held > 0 { return nil }
                    }
                    continue
                }
                if held > 0 { return nil }
                // Timed, so that an interruption is noticed without a broadcast.
                locked.wait(seconds: 0.2)
            }
        }
    }

    private enum Ending {
        /// Nothing left for this worker: it is told to finish and exits.
        case drained
        /// The worker died, or stopped reading.
        case died
        /// The job with this index ran past the deadline.
        case late(Int)
    }

    private func runWorker(_ slot: Int, _ source: any JobSource, finish: @escaping @Sendable (JobResult) -> Void) throws {
        let worker = try launch.start()
        // A thread cannot be killed: it is given no pid, and only a process's jobs can end as late or crashed.
        let pid = worker.pid
        shared.withLock { locked in
            locked.state.unprocessedBySupervisor[slot] = 0
            if let process = worker.process {
                locked.state.workers[process.processIdentifier] = process
                if locked.state.drainExpired { process.signal(SIGKILL) }
            }
        }
        defer {
            if let pid { shared.withLock { _ = $0.state.workers.removeValue(forKey: pid) } }
        }
        let input = worker.input, output = worker.output
        let writer = input
        let reader = LineReader(output)
        var inFlight: [Int: Item] = [:]
        /// Sent and not yet processed, in the order the worker takes them.
        var unprocessed: [Int] = []
        /// Sent and not yet reported, in the order sent.
        var order: [Int] = []
        /// The job the worker is on, and since when (uptime nanoseconds).
        var clock: (index: Int, since: UInt64)?
        let limit = deadline.map { UInt64($0 * 1e9) }
        // A streaming source may have a job while this worker waits for answers:
        // look again every few milliseconds while the window has room.
        let streaming = source.remaining == nil
        /// How much of the ledger this worker has been told.
        var told = 0

        func startClock() {
            let count = unprocessed.count
            shared.withLock { $0.state.unprocessedBySupervisor[slot] = count }
            guard let head = unprocessed.first else { clock = nil; return }
            if clock?.index != head {
                clock = (head, DispatchTime.now().uptimeNanoseconds)
                if let item = inFlight[head] { faults.began(key: item.entry.relativePath, inWorker: pid) }
            }
        }

        func complete(_ reply: WorkerProtocol.Reply) {
            guard let item = inFlight.removeValue(forKey: reply.i) else { return }
            order.removeAll { $0 == reply.i }
            let outcome: JobOutcome
            switch reply.outcome {
            case "processed": outcome = .processed(reply.variants ?? [:])
            case "skipped": outcome = .skipped
            default: outcome = .failed(SnapError(reply.code ?? .internal, reply.message ?? "worker gave no reason"))
            }
            shared.withLock { locked in
                locked.state.outstanding -= 1
                locked.broadcast()
            }
            finish(JobResult(entry: item.entry, outcome: outcome, milliseconds: reply.ms, workerPeakRSSBytes: reply.rss,
                             sourceDigest: reply.digest, replacedDigest: reply.replaced, rederived: reply.rederived ?? false, manifestJSON: reply.manifest,
                             attempts: item.attempts + 1, id: item.id))
        }

        var ending = Ending.drained
        work: while true {
            // Fill the window (a suspect only ever travels alone).
            while unprocessed.count < window, !(inFlight.values.contains { $0.attempts > 0 }),
                  let item = take(slot, held: inFlight.count, unprocessed: unprocessed.count, from: source) {
                let entry = item.entry
                var job = WorkerProtocol.Job(i: item.index, path: entry.path, key: entry.relativePath, size: entry.size,
                                             absent: entry.manifestAbsent ? true : nil, raw: entry.rawPath,
                                             manifest: answersWithManifests ? true : nil)
                job.expect(entry.expected)
                if let ledger {
                    let (news, next) = ledger.since(told)
                    if !news.isEmpty { job.blobs = news }
                    told = next
                }
                var line = Data(WorkerLine.encode(job))
                line.append(0x0A)
                inFlight[item.index] = item
                order.append(item.index)
                do { try writer.write(contentsOf: line) } catch { ending = .died; break work }
                unprocessed.append(item.index)
                startClock()
                faults.dispatched(key: entry.relativePath, toWorker: pid)
                if item.attempts > 0 { break }
            }
            if inFlight.isEmpty {
                if isOver { break }
                continue
            }
            var until = clock.flatMap { clock in limit.map { clock.since + $0 } }
            if streaming, unprocessed.count < window, !(inFlight.values.contains { $0.attempts > 0 }) {
                let soon = DispatchTime.now().uptimeNanoseconds + 5_000_000
                until = min(until ?? soon, soon)
            }
            switch reader.next(until: until) {
            case .end:
                ending = .died
                break work
            case .timedOut:
                if let clock, let limit, DispatchTime.now().uptimeNanoseconds >= clock.since + limit {
                    ending = .late(clock.index)
                    break work
                }
            case .line(let line):
                guard let reply = WorkerLine.reply(line) else { continue }
                unprocessed.removeAll { $0 == reply.i }
                if let blobs = reply.blobs { ledger?.add(blobs) }
                startClock()
                if reply.outcome != "staged" { complete(reply) }
            }
        }

        try? writer.close()
        if case .drained = ending {
            worker.wait()
            return
        }
        worker.kill()
        worker.wait()
        let status = worker.status
        var held = order.compactMap { inFlight[$0] }
        /// What becomes of the jobs this worker held.
        enum Verdict {
            case abandoned([Item]), late(Item), failed([Item]), crashed([Item])
        }
        let verdict: Verdict = shared.withLock { locked in
            defer { locked.broadcast() }
            if locked.state.drainExpired {
                // Killed at the end of a drain: hand everything back.
                locked.state.outstanding -= held.count
                return .abandoned(held)
            }
            if case .late(let index) = ending, let position = held.firstIndex(where: { $0.index == index }) {
                // Only the late job ends; the others did nothing wrong and are dealt again as they were.
                let late = held.remove(at: position)
                locked.state.queue.append(contentsOf: held.reversed())
                locked.state.outstanding -= 1
                return .late(late)
            }
            if status.exited {
                // It exited on its own (it could not open its store, say): no evidence
                // against its jobs, which fail as I/O errors (transient for watch).
                locked.state.outstanding -= held.count
                return .failed(held)
            }
            // The worker died (or stopped reading): whatever it held is suspect.
            var crashed: [Item] = []
            for item in held {
                if held.count == 1 && item.attempts >= loneCrashRetries { crashed.append(item) } else { locked.state.suspects.append(Item(index: item.index, id: item.id, entry: item.entry, attempts: item.attempts + 1)) }
            }
            locked.state.outstanding -= crashed.count
            return .crashed(crashed)
        }
        let crashed: [Item]
        switch verdict {
        case .abandoned(let items):
            for item in items { finish(JobResult(entry: item.entry, outcome: .abandoned, milliseconds: 0, id: item.id)) }
            return
        case .late(let late):
            let seconds = deadline ?? 0
            let reason = SnapError(.timeout, "processing took longer than the per-image time limit of \(seconds) s; its worker process was killed")
            finish(JobResult(entry: late.entry, outcome: .timedOut(reason), milliseconds: seconds * 1000, attempts: late.attempts + 1, id: late.id))
            return
        case .failed(let items):
            let reason = SnapError(.io, "the worker \(status) before answering (see its message on stderr)")
            for item in items { finish(JobResult(entry: item.entry, outcome: .failed(reason), milliseconds: 0, attempts: item.attempts + 1, id: item.id)) }
            return
        case .crashed(let items):
            crashed = items
        }
        for item in crashed {
            let reason = SnapError(.poison, item.attempts > 0
                ? "a worker process died on this file (alone, after \(item.attempts) earlier crash\(item.attempts == 1 ? "" : "es"); \(status))"
                : "a worker process died on this file (alone; \(status))")
            finish(JobResult(entry: item.entry, outcome: .crashed(reason), milliseconds: 0, attempts: item.attempts + 1, id: item.id))
        }
    }
}

extension ProcessPool {
    /// Runs a backfill's files; a stopped run's unfinished files are not reported.
    func run(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) throws {
        try run(FileList(files)) { result in
            let outcome: FileOutcome
            switch result.verdict {
            case .published(let variants, _, _): outcome = .processed(variants)
            case .repeated: outcome = .skipped
            case .superseded(let error), .transient(let error), .refused(let error, _): outcome = .failed(error)
            case .abandoned: return
            }
            finish(FileResult(entry: result.entry, outcome: outcome, milliseconds: result.milliseconds, workerPeakRSSBytes: result.workerPeakRSSBytes))
        }
    }
}

