import Foundation
import SnapThumbCore

/// The line protocol between a backfill and its `snapthumb worker` processes:
/// one JSON object per line each way (written and read by `WorkerLine`).
enum WorkerProtocol {
    struct Job: Codable, Equatable {
        /// Index of the file in the run.
        var i: Int
        var path: String
        var key: String
        var size: Int
        /// The store's listing showed no manifest for this key.
        var absent: Bool?
        /// The path byte for byte, only when it is not UTF-8 (`path` is then escaped).
        var raw: [UInt8]? = nil
        /// Blobs the store holds that this worker has not been told of yet (a
        /// bucket's listing, other workers' writes): it does not write them again.
        var blobs: [String]? = nil
        /// What the notification announced (`FileWalker.Entry.expected`): the generation
        /// (decimal), the size, the MD5 (base64).
        var generation: String? = nil
        var bytes: Int? = nil
        var md5: String? = nil

        /// Carries the entry's expectation.
        mutating func expect(_ expected: SourceExpectation?) {
            generation = expected?.generation.map { String($0) }
            bytes = expected?.size.map { Int($0) }
            md5 = expected?.md5.map { Data($0).base64EncodedString() }
        }

        /// The expectation the job carries (nil when none).
        var expected: SourceExpectation? {
            let expected = SourceExpectation(generation: generation.flatMap { Int64($0) }, size: bytes.map { Int64($0) },
                                             md5: md5.flatMap { Data(base64Encoded: $0) }.map { Array($0) })
            return expected.isEmpty ? nil : expected
        }
    }

    struct Reply: Codable, Equatable {
        var i: Int
        /// `staged` (processed, being committed: another answer follows), then
        /// `processed`; or `skipped` or `failed`.
        var outcome: String
        var ms: Double
        var code: ErrorCode?
        var message: String?
        /// The published upload's variants (processed only).
        var variants: [String: VariantBrief]?
        /// The worker's peak RSS so far, in bytes (for `bench`).
        var rss: Int?
        /// The source's digest (processed only).
        var digest: String?
        /// The source digest of another upload's manifest that this publish replaced.
        var replaced: String?
        /// The blobs the store now holds for this upload (processed, bucket stores only).
        var blobs: [String]? = nil
    }
}

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
public final class ProcessPool: @unchecked Sendable {
    public let executable: String
    public let arguments: [String]
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
    /// What the store holds, passed on to every worker with its jobs (nil: not tracked).
    let ledger: BlobLedger?

    struct Item {
        /// The job's number in this run (`i` in the protocol).
        let index: Int
        let entry: FileWalker.Entry
        /// Times it was held by a worker that died.
        var attempts: Int
    }

    private let lock = NSCondition()
    /// Jobs to deal again (their worker was killed for another job's deadline).
    private var queue: [Item] = []
    /// Jobs held by a worker that died: each goes alone to a fresh worker.
    private var suspects: [Item] = []
    /// Taken from the source and not yet reported.
    private var outstanding = 0
    private var taken = 0
    private var sourceEnded = false
    private var stopping = false
    private var drainExpired = false
    /// Worker processes running now, for the drain deadline.
    private var workers: Set<Int32> = []
    /// Per supervisor: how many jobs its worker has been sent and not processed yet;
    /// nil once the supervisor has ended. A streaming source's job never goes to a
    /// worker that has one to process while another has none (see `take`).
    private var unprocessedBySupervisor: [Int?] = []

    public init(executable: String, arguments: [String], jobs: Int, window: Int = 8, deadline: Double? = nil,
                loneCrashRetries: Int = 1, faults: any RunFaults = NoFaults(), interruption: Interruption = Interruption(),
                knownBlobs: [String]? = nil) {
        self.faults = faults
        ledger = knownBlobs.map(BlobLedger.init)
        self.interruption = interruption
        self.executable = executable
        self.arguments = arguments
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
        lock.lock()
        // Every supervisor counts as idle from the start, so that a job does not wait
        // behind another in a worker while a second worker is still starting.
        unprocessedBySupervisor = Array(repeating: 0, count: supervisors)
        lock.unlock()
        let group = DispatchGroup()
        for n in 0..<supervisors {
            group.enter()
            let thread = Thread { [self] in
                defer {
                    lock.lock()
                    unprocessedBySupervisor[n] = nil
                    lock.broadcast()
                    lock.unlock()
                    group.leave()
                }
                supervise(n, source, finish: finish)
            }
            thread.name = "snapthumb-worker-supervisor-\(n)"
            thread.start()
        }
        group.wait()

        // A stopped run: what was taken and never finished is handed back.
        lock.lock()
        let left = queue + suspects
        queue = []; suspects = []
        outstanding -= left.count
        let unfinished = !sourceEnded && !isStopping
        lock.unlock()
        for item in left { finish(JobResult(entry: item.entry, outcome: .abandoned, milliseconds: 0)) }
        if unfinished { throw SnapError(.internal, "cannot start a worker process (\(executable))") }
    }

    /// Stops the run: no job is taken any more; jobs in flight finish. After
    /// `drainDeadline` seconds (nil: no limit) the workers still running are
    /// killed and their jobs reported as `abandoned`. Returns at once; ``run(_:finish:)``
    /// returns when the run has ended.
    public func stop(drainDeadline: Double? = nil) {
        lock.lock()
        stopping = true
        lock.broadcast()
        lock.unlock()
        guard let drainDeadline else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, drainDeadline)) { [self] in
            lock.lock()
            drainExpired = true
            let running = workers
            lock.unlock()
            for pid in running { kill(pid, SIGKILL) }
        }
    }

    /// Whether new jobs must not start (call with the lock held).
    private var isStopping: Bool { stopping || interruption.signal != nil }
    /// Whether every job there will ever be is reported (call with the lock held).
    private var isFinished: Bool { sourceEnded && outstanding == 0 }

    /// Keeps one worker process busy until no work is left, replacing it when it dies.
    private func supervise(_ slot: Int, _ source: any JobSource, finish: @escaping @Sendable (JobResult) -> Void) {
        while true {
            lock.lock()
            let over = isFinished || isStopping
            lock.unlock()
            if over { return }
            do {
                try runWorker(slot, source, finish: finish)
            } catch {
                // Cannot even start a worker: fail what is left rather than spin
                // (all of a file list; a streaming source keeps its jobs).
                lock.lock()
                var left = queue + suspects
                queue = []; suspects = []
                if source.remaining != nil {
                    while case .job(let entry) = source.next(waitingUpTo: 0) {
                        left.append(Item(index: taken, entry: entry, attempts: 0))
                        taken += 1; outstanding += 1
                    }
                    sourceEnded = true
                }
                outstanding -= left.count
                lock.broadcast()
                lock.unlock()
                for item in left {
                    finish(JobResult(entry: item.entry, outcome: .failed(SnapError(.internal, "cannot start a worker process: \(error)")), milliseconds: 0))
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
        lock.lock()
        defer { lock.unlock() }
        while true {
            if isFinished || isStopping { return nil }
            if held == 0, let suspect = suspects.popLast() { return suspect }
            // Streaming (watch): a worker with a job to process takes no other while
            // another worker has none; the idle one's supervisor is waiting on the
            // source and takes it at once. (It would otherwise wait behind this
            // worker's job, and a job that wedges this worker would take it along.)
            if unprocessed > 0, source.remaining == nil,
               unprocessedBySupervisor.indices.contains(where: { $0 != slot && unprocessedBySupervisor[$0] == 0 }) {
                return nil
            }
            // No more than a fair share of what is left, so that the workers finish
            // together: a small run is not dealt out in windows to the first worker.
            if unprocessed > 0, let left = source.remaining, unprocessed > (queue.count + left) / jobs { return nil }
            if let next = queue.popLast() { return next }
            if !sourceEnded {
                // The source may block: ask it without the lock (a worker that holds
                // jobs only takes one that is ready now).
                lock.unlock()
                let next = source.next(waitingUpTo: held > 0 ? 0 : 0.2)
                lock.lock()
                switch next {
                case .job(let entry):
                    let item = Item(index: taken, entry: entry, attempts: 0)
                    taken += 1
                    outstanding += 1
                    // Stopped meanwhile: it is handed back as abandoned when the run ends.
                    if isStopping { queue.append(item); return nil }
                    return item
                case .ended:
                    sourceEnded = true
                    lock.broadcast()
                case .notYet:
                    if held > 0 { return nil }
                }
                continue
            }
            if held > 0 { return nil }
            // Timed, so that an interruption is noticed without a broadcast.
            _ = lock.wait(until: Date(timeIntervalSinceNow: 0.2))
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let pid = process.processIdentifier
        lock.lock()
        unprocessedBySupervisor[slot] = 0
        workers.insert(pid)
        if drainExpired { kill(pid, SIGKILL) }
        lock.unlock()
        defer {
            lock.lock()
            workers.remove(pid)
            lock.unlock()
        }
        let writer = input.fileHandleForWriting
        let reader = LineReader(output.fileHandleForReading)
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
            lock.lock()
            unprocessedBySupervisor[slot] = unprocessed.count
            lock.unlock()
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
            lock.lock()
            outstanding -= 1
            lock.broadcast()
            lock.unlock()
            finish(JobResult(entry: item.entry, outcome: outcome, milliseconds: reply.ms, workerPeakRSSBytes: reply.rss,
                             sourceDigest: reply.digest, replacedDigest: reply.replaced, attempts: item.attempts + 1))
        }

        var ending = Ending.drained
        work: while true {
            // Fill the window (a suspect only ever travels alone).
            while unprocessed.count < window, !(inFlight.values.contains { $0.attempts > 0 }),
                  let item = take(slot, held: inFlight.count, unprocessed: unprocessed.count, from: source) {
                let entry = item.entry
                var job = WorkerProtocol.Job(i: item.index, path: entry.path, key: entry.relativePath, size: entry.size,
                                             absent: entry.manifestAbsent ? true : nil, raw: entry.rawPath)
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
                lock.lock()
                let over = isFinished || isStopping
                lock.unlock()
                if over { break }
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
            process.waitUntilExit()
            return
        }
        kill(pid, SIGKILL)
        process.waitUntilExit()
        let status = process.terminationStatus
        let how = process.terminationReason == .uncaughtSignal ? "signal \(status)" : "exit status \(status)"
        var held = order.compactMap { inFlight[$0] }
        lock.lock()
        if drainExpired {
            // Killed at the end of a drain: hand everything back.
            outstanding -= held.count
            lock.broadcast()
            lock.unlock()
            for item in held { finish(JobResult(entry: item.entry, outcome: .abandoned, milliseconds: 0)) }
            return
        }
        if case .late(let index) = ending, let position = held.firstIndex(where: { $0.index == index }) {
            // Only the late job ends; the others did nothing wrong and are dealt again as they were.
            let late = held.remove(at: position)
            queue.append(contentsOf: held.reversed())
            outstanding -= 1
            lock.broadcast()
            lock.unlock()
            let seconds = deadline ?? 0
            let reason = SnapError(.timeout, "processing took longer than the per-image time limit of \(seconds) s; its worker process was killed")
            finish(JobResult(entry: late.entry, outcome: .timedOut(reason), milliseconds: seconds * 1000, attempts: late.attempts + 1))
            return
        }
        if process.terminationReason == .exit {
            // It exited on its own (it could not open its store, say): no evidence
            // against its jobs, which fail as I/O errors (transient for watch).
            outstanding -= held.count
            lock.broadcast()
            lock.unlock()
            let reason = SnapError(.io, "the worker process exited with status \(status) before answering (see its message on stderr)")
            for item in held { finish(JobResult(entry: item.entry, outcome: .failed(reason), milliseconds: 0, attempts: item.attempts + 1)) }
            return
        }
        // The worker died (or stopped reading): whatever it held is suspect.
        var crashed: [Item] = []
        for item in held {
            if held.count == 1 && item.attempts >= loneCrashRetries { crashed.append(item) } else { suspects.append(Item(index: item.index, entry: item.entry, attempts: item.attempts + 1)) }
        }
        outstanding -= crashed.count
        lock.broadcast()
        lock.unlock()
        for item in crashed {
            let reason = SnapError(.poison, item.attempts > 0
                ? "a worker process died on this file (alone, after \(item.attempts) earlier crash\(item.attempts == 1 ? "" : "es"); \(how))"
                : "a worker process died on this file (alone; \(how))")
            finish(JobResult(entry: item.entry, outcome: .crashed(reason), milliseconds: 0, attempts: item.attempts + 1))
        }
    }
}

extension ProcessPool {
    /// Runs a backfill's files; a stopped run's unfinished files are not reported.
    func run(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) throws {
        try run(FileList(files)) { result in
            let outcome: FileOutcome
            switch result.outcome {
            case .processed(let variants): outcome = .processed(variants)
            case .skipped: outcome = .skipped
            case .failed(let error), .crashed(let error), .timedOut(let error): outcome = .failed(error)
            case .abandoned: return
            }
            finish(FileResult(entry: result.entry, outcome: outcome, milliseconds: result.milliseconds, workerPeakRSSBytes: result.workerPeakRSSBytes))
        }
    }
}

/// The blobs a run's store holds, as its workers learn them: the parent's
/// listing, then what each worker reports having stored. Each worker is told,
/// with its next job, what it has not been told yet, so that a blob is PUT once
/// per run rather than once per worker (a worker otherwise starts knowing nothing).
final class BlobLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var names: [String] = []
    private var seen: Set<String> = []

    init(_ initial: [String]) { add(initial) }

    func add(_ new: [String]) {
        lock.lock()
        for name in new where seen.insert(name).inserted { names.append(name) }
        lock.unlock()
    }

    /// The names added since `cursor`, and the cursor to ask with next time.
    func since(_ cursor: Int) -> ([String], Int) {
        lock.lock()
        defer { lock.unlock() }
        return (cursor < names.count ? Array(names[cursor...]) : [], names.count)
    }
}

/// Reads newline-terminated lines from a pipe.
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    /// Where the next line starts: lines are sliced off without copying the rest
    /// of the buffer each time (a full window of replies arrives in one read).
    private var start = 0
    /// Where to look for the next newline: everything before it was searched.
    private var searched = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line; `beforeBlocking` runs when none is buffered and none is
    /// waiting in the pipe either, before waiting for one.
    func next(beforeBlocking: () -> Void = {}) -> Data? {
        while true {
            if let line = bufferedLine() { return line }
            // The buffer being empty is not enough: the writer usually has the next
            // line in the pipe already (checking only the buffer made the worker's
            // committer sync once per snap).
            if !Self.readable(handle.fileDescriptor) { beforeBlocking() }
            if !fill() { return nil }
        }
    }

    enum Read {
        case line(Data)
        case end
        /// Nothing arrived before the deadline.
        case timedOut
    }

    /// The next line, waiting until `deadline` (uptime nanoseconds; nil: for ever).
    func next(until deadline: UInt64?) -> Read {
        while true {
            if let line = bufferedLine() { return .line(line) }
            if let deadline {
                let now = DispatchTime.now().uptimeNanoseconds
                if now >= deadline { return .timedOut }
                let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
                if !Self.readable(handle.fileDescriptor, waitingMilliseconds: milliseconds) { continue }
            }
            if !fill() { return .end }
        }
    }

    /// A complete line already read, if there is one.
    private func bufferedLine() -> Data? {
        guard let newline = buffer[searched...].firstIndex(of: 0x0A) else {
            searched = buffer.count
            return nil
        }
        let line = Data(buffer[start..<newline])
        start = newline + 1
        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        searched = start
        return line
    }

    /// Reads what the pipe has (waiting for something); false at end of file.
    private func fill() -> Bool {
        let chunk = handle.availableData
        if chunk.isEmpty { return false }
        if start > 0 { buffer.removeFirst(start); searched -= start; start = 0 }
        buffer.append(contentsOf: chunk)
        return true
    }

    /// Whether a read from `fd` would return at once (data, end of file or an error).
    private static func readable(_ fd: Int32, waitingMilliseconds timeout: Int32 = 0) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, timeout) > 0
    }
}

extension Backfill {
    /// The worker side: reads jobs from `input`, answers on `output`, until input ends.
    /// - Parameter commitDelay: how long the group commit gathers a batch (seconds).
    public func serveWorker(input: FileHandle = .standardInput, output: FileHandle = .standardOutput, commitDelay: Double = defaultGroupCommitDelay) {
        let outputLock = NSLock()
        @Sendable func reply(_ r: WorkerProtocol.Reply) {
            var r = r
            r.rss = ResourceUsage.ownPeakRSSBytes
            outputLock.lock()
            defer { outputLock.unlock() }
            var line = Data(WorkerLine.encode(r))
            line.append(0x0A)
            try? output.write(contentsOf: line)
        }
        let committer: any UploadCommitter<(Int, Double, String?)> = store.makeCommitter(maxDelay: commitDelay) { tag, upload, error in
            if let error {
                reply(.init(i: tag.0, outcome: "failed", ms: tag.1, code: error.code, message: error.message, variants: nil))
            } else {
                reply(.init(i: tag.0, outcome: "processed", ms: tag.1, code: nil, message: nil, variants: VariantBrief.of(upload.manifest),
                            digest: upload.manifest.source.digest, replaced: tag.2,
                            blobs: store.knownBlobs != nil ? upload.blobs.map(\.hex) : nil))
            }
        }
        let reader = LineReader(input)
        // With no job waiting, nothing more can join the committer's batch: let it
        // commit now rather than wait for company (at the end of a run, the
        // parent's next files may wait for exactly these commits).
        while let line = reader.next(beforeBlocking: { committer.flush() }) {
            guard let job = WorkerLine.job(line) else { continue }
            if let blobs = job.blobs { store.knownBlobs?.insert(contentsOf: blobs) }
            var entry = FileWalker.Entry(relativePath: job.key, path: job.path, size: job.size,
                                         manifestAbsent: job.absent ?? false, rawPath: job.raw)
            entry.expected = job.expected
            let started = DispatchTime.now().uptimeNanoseconds
            let prepared = prepare(entry)
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            switch prepared {
            case .ready(let upload, let replacing):
                committer.submit(upload, tag: (job.i, ms, replacing))
                reply(.init(i: job.i, outcome: "staged", ms: ms, code: nil, message: nil, variants: nil))
            case .done(.skipped):
                reply(.init(i: job.i, outcome: "skipped", ms: ms, code: nil, message: nil, variants: nil))
            case .done(.failed(let error)):
                reply(.init(i: job.i, outcome: "failed", ms: ms, code: error.code, message: error.message, variants: nil))
            case .done(.processed(let variants)):
                reply(.init(i: job.i, outcome: "processed", ms: ms, code: nil, message: nil, variants: variants))
            }
        }
        committer.finish()
    }
}
