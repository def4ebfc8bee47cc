import Foundation
import SnapThumbCore

/// The line protocol between a backfill and its `snapthumb worker` processes:
/// one JSON object per line each way.
enum WorkerProtocol {
    struct Job: Codable {
        /// Index of the file in the run.
        var i: Int
        var path: String
        var key: String
        var size: Int
        /// The store's listing showed no manifest for this key.
        var absent: Bool?
        /// The path byte for byte, only when it is not UTF-8 (`path` is then escaped).
        var raw: [UInt8]? = nil
    }

    struct Reply: Codable {
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
    }
}

/// Runs files through `jobs` long-lived worker processes. Each worker gets a
/// few files ahead, so that it never waits for the next one. It says when it has
/// processed a file (`staged`) and again once that file is durable: its group
/// commit batches many files, and only unprocessed files count against the
/// window, so a worker is never held up by its own commits. A worker that dies is replaced;
/// the files it held are retried one at a time in a fresh worker, so that a
/// file that crashes a worker on its own is failed (`poison`) and the rest
/// still go through.
final class ProcessPool: @unchecked Sendable {
    let executable: String
    let arguments: [String]
    let jobs: Int
    /// Files sent ahead to one worker that it has not processed yet: enough to
    /// cover a round trip through this process. (Counting files waiting for the
    /// group commit as well starved the workers at the end of every run, where a
    /// fair share of what is left is a few files and a commit takes 15–30 ms.)
    let window: Int
    let faults: any RunFaults
    let interruption: Interruption

    private let lock = NSCondition()
    private var queue: [(index: Int, attempts: Int)] = []
    private var suspects: [(index: Int, attempts: Int)] = []
    private var outstanding = 0

    init(executable: String, arguments: [String], jobs: Int, window: Int = 8, faults: any RunFaults = NoFaults(), interruption: Interruption = Interruption()) {
        self.faults = faults
        self.interruption = interruption
        self.executable = executable
        self.arguments = arguments
        self.jobs = max(1, jobs)
        self.window = max(1, window)
    }

    func run(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) throws {
        lock.lock()
        queue = files.indices.reversed().map { ($0, 0) }
        outstanding = files.count
        lock.unlock()
        guard !files.isEmpty else { return }

        let group = DispatchGroup()
        for n in 0..<min(jobs, files.count) {
            group.enter()
            let thread = Thread { [self] in
                defer { group.leave() }
                supervise(files, finish: finish)
            }
            thread.name = "snapthumb-worker-supervisor-\(n)"
            thread.start()
        }
        group.wait()
    }

    /// Keeps one worker process busy until no work is left, replacing it when it dies.
    private func supervise(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) {
        while true {
            lock.lock()
            let done = outstanding == 0
            lock.unlock()
            if done || interruption.signal != nil { return }
            do {
                try runWorker(files, finish: finish)
            } catch {
                // Cannot even start a worker: fail what is left rather than spin.
                lock.lock()
                let left = queue + suspects
                queue = []; suspects = []
                outstanding -= left.count
                lock.broadcast()
                lock.unlock()
                for item in left {
                    finish(FileResult(entry: files[item.index], outcome: .failed(SnapError(.internal, "cannot start a worker process: \(error)")), milliseconds: 0))
                }
                return
            }
        }
    }

    /// Takes the next file for a worker that holds `held` files, `unprocessed` of
    /// them not yet processed: suspects go alone to a worker that holds nothing.
    /// Waits only when the worker holds nothing and there is nothing to give it yet.
    private func take(held: Int, unprocessed: Int) -> (index: Int, attempts: Int)? {
        lock.lock()
        defer { lock.unlock() }
        while true {
            if outstanding == 0 || interruption.signal != nil { return nil }
            if held == 0, let suspect = suspects.popLast() { return suspect }
            // No more than a fair share of what is left, so that the workers finish
            // together: a small run is not dealt out in windows to the first worker.
            if unprocessed > 0, unprocessed > queue.count / jobs { return nil }
            if suspects.isEmpty || held > 0, let next = queue.popLast() { return next }
            if held > 0 { return nil }
            // Timed, so that an interruption is noticed without a broadcast.
            _ = lock.wait(until: Date(timeIntervalSinceNow: 0.2))
        }
    }

    private func runWorker(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let writer = input.fileHandleForWriting
        let reader = LineReader(output.fileHandleForReading)
        var inFlight: [Int: (index: Int, attempts: Int)] = [:]
        /// Sent and not yet processed (a subset of inFlight).
        var unprocessed: Set<Int> = []
        var order: [Int] = []
        let encoder = JSONEncoder()
        let decoder = JSONDecoder()

        func complete(_ reply: WorkerProtocol.Reply) {
            guard let item = inFlight.removeValue(forKey: reply.i) else { return }
            order.removeAll { $0 == reply.i }
            let entry = files[item.index]
            let outcome: FileOutcome
            switch reply.outcome {
            case "processed": outcome = .processed(reply.variants ?? [:])
            case "skipped": outcome = .skipped
            default: outcome = .failed(SnapError(reply.code ?? .internal, reply.message ?? "worker gave no reason"))
            }
            lock.lock()
            outstanding -= 1
            lock.broadcast()
            lock.unlock()
            finish(FileResult(entry: entry, outcome: outcome, milliseconds: reply.ms, workerPeakRSSBytes: reply.rss))
        }

        var alive = true
        while alive {
            // Fill the window (a suspect only ever travels alone).
            while unprocessed.count < window, !(inFlight.values.contains { $0.attempts > 0 }),
                  let item = take(held: inFlight.count, unprocessed: unprocessed.count) {
                let entry = files[item.index]
                let job = WorkerProtocol.Job(i: item.index, path: entry.path, key: entry.relativePath, size: entry.size,
                                             absent: entry.manifestAbsent ? true : nil, raw: entry.rawPath)
                var line = (try? encoder.encode(job)) ?? Data()
                line.append(0x0A)
                do { try writer.write(contentsOf: line) } catch { inFlight[item.index] = item; alive = false; break }
                inFlight[item.index] = item
                unprocessed.insert(item.index)
                order.append(item.index)
                faults.dispatched(key: entry.relativePath, toWorker: process.processIdentifier)
                if item.attempts > 0 { break }
            }
            if inFlight.isEmpty {
                lock.lock()
                let done = outstanding == 0
                lock.unlock()
                if done || interruption.signal != nil { break }
                continue
            }
            guard alive, let line = reader.next() else { alive = false; break }
            guard let reply = try? decoder.decode(WorkerProtocol.Reply.self, from: line) else { continue }
            unprocessed.remove(reply.i)
            if reply.outcome != "staged" { complete(reply) }
        }

        try? writer.close()
        if alive {
            process.waitUntilExit()
            return
        }
        // The worker died (or stopped reading): whatever it held is suspect.
        process.terminate()
        process.waitUntilExit()
        let status = process.terminationStatus
        let held = order.compactMap { inFlight[$0] }
        lock.lock()
        var poisoned: [(index: Int, attempts: Int)] = []
        for item in held {
            if item.attempts >= 1 && held.count == 1 { poisoned.append(item) } else { suspects.append((item.index, item.attempts + 1)) }
        }
        outstanding -= poisoned.count
        lock.broadcast()
        lock.unlock()
        for item in poisoned {
            let reason = SnapError(.poison, "a worker process died on this file (alone, after an earlier crash; exit status \(status))")
            finish(FileResult(entry: files[item.index], outcome: .failed(reason), milliseconds: 0))
        }
    }
}

/// Reads newline-terminated lines from a pipe.
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    /// Where the next line starts: lines are sliced off without copying the rest
    /// of the buffer each time (a full window of replies arrives in one read).
    private var start = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line; `beforeBlocking` runs when none is buffered and none is
    /// waiting in the pipe either, before waiting for one.
    func next(beforeBlocking: () -> Void = {}) -> Data? {
        var searched = start
        while true {
            if let newline = buffer[searched...].firstIndex(of: 0x0A) {
                let line = Data(buffer[start..<newline])
                start = newline + 1
                if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
                return line
            }
            // The buffer being empty is not enough: the writer usually has the next
            // line in the pipe already (checking only the buffer made the worker's
            // committer sync once per snap).
            if !Self.readable(handle.fileDescriptor) { beforeBlocking() }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            if start > 0 { buffer.removeFirst(start); start = 0 }
            searched = buffer.count
            buffer.append(contentsOf: chunk)
        }
    }

    /// Whether a read from `fd` would return at once (data, end of file or an error).
    private static func readable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }
}

extension Backfill {
    /// The worker side: reads jobs from `input`, answers on `output`, until input ends.
    /// - Parameter commitDelay: how long the group commit gathers a batch (seconds).
    public func serveWorker(input: FileHandle = .standardInput, output: FileHandle = .standardOutput, commitDelay: Double = defaultGroupCommitDelay) {
        let outputLock = NSLock()
        let encoder = JSONEncoder()
        @Sendable func reply(_ r: WorkerProtocol.Reply) {
            var r = r
            r.rss = ResourceUsage.ownPeakRSSBytes
            outputLock.lock()
            defer { outputLock.unlock() }
            var line = (try? encoder.encode(r)) ?? Data()
            line.append(0x0A)
            try? output.write(contentsOf: line)
        }
        let committer: any UploadCommitter<(Int, Double)> = store.makeCommitter(maxDelay: commitDelay) { tag, upload, error in
            if let error {
                reply(.init(i: tag.0, outcome: "failed", ms: tag.1, code: error.code, message: error.message, variants: nil))
            } else {
                reply(.init(i: tag.0, outcome: "processed", ms: tag.1, code: nil, message: nil, variants: VariantBrief.of(upload.manifest)))
            }
        }
        let reader = LineReader(input)
        let decoder = JSONDecoder()
        // With no job waiting, nothing more can join the committer's batch: let it
        // commit now rather than wait for company (at the end of a run, the
        // parent's next files may wait for exactly these commits).
        while let line = reader.next(beforeBlocking: { committer.flush() }) {
            guard let job = try? decoder.decode(WorkerProtocol.Job.self, from: line) else { continue }
            let entry = FileWalker.Entry(relativePath: job.key, path: job.path, size: job.size,
                                         manifestAbsent: job.absent ?? false, rawPath: job.raw)
            let started = DispatchTime.now().uptimeNanoseconds
            let prepared = prepare(entry)
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            switch prepared {
            case .ready(let upload):
                committer.submit(upload, tag: (job.i, ms))
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
