import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SystemKit


/// The runner's job source in `consume`: uploads announced on a queue. It only says what
/// the next job is and acknowledges what the runner reports; running, retrying crashed
/// workers and committing are the runner's (`ProcessPool`), as for backfill and watch.
///
///     receive (long poll, ≤ 10 at a time, ≤ `capacity` messages held)
///     → decode events → one job per upload under --source (nothing: delete, one log line)
///     → the runner's worker processes publish (group commit: durable)
///     → every job of the message ended:
///         published or repeat ........................ delete
///         superseded (a newer generation was written) .. delete, one log line
///         refused with a code ........................ dead-letter queue, then delete
///         transient (store, source unreachable) ....... leave it: visible again after a backoff
///         abandoned at shutdown ...................... release (visible again at once)
///
/// Messages held longer than half their lease get it extended. A message is deleted only
/// after all of that: a worker killed with -9 loses nothing, its messages come back.
final class QueueSource: JobSource, Sendable {
    let queue: any MessageQueue
    let deadLetters: (any DeadLetterSink)?
    let scope: SourceScope
    let decode: @Sendable (QueueMessage) -> [BucketEvent]?
    let metrics: ConsumeMetrics
    let logger: Logger
    let worker: String
    /// Messages held at once (received and not yet deleted or released).
    let capacity: Int
    private let backoff = Backoff()

    /// All the mutable state; the runner waits on it for jobs.
    private let monitor = Monitor(State())
    private let cancellation = ReceiveCancellation()
    /// Deletes, releases and dead letters under way (they run off the runner's threads).
    private let settling = DispatchGroup()

    private struct State {
        var ready: [Job] = []
        /// Held messages by message id.
        var held: [String: Held] = [:]
        /// Message ids of the jobs given to the runner, by source path, in the order given.
        var dealt: [String: [String]] = [:]
        var stopped = false
        var pausedUntil = 0.0
        /// When the receive loop last went round (uptime seconds), for the watchdog.
        var lastLoop = ProcessInfo.processInfo.systemUptime
    }

    struct Job {
        let entry: FileWalker.Entry
        let messageID: String
    }

    struct Refusal {
        let key: String?
        let object: String?
        let error: SnapError
        var body: String? = nil
    }

    /// One message from receipt to deletion or release.
    struct Held {
        var message: QueueMessage
        /// Jobs not yet reported by the runner.
        var pending: Int
        var leaseUntil: Double
        var refusals: [Refusal] = []
        var transient: SnapError?
        var abandoned = false
    }

    init(queue: any MessageQueue, deadLetters: (any DeadLetterSink)?, scope: SourceScope,
         decode: @escaping @Sendable (QueueMessage) -> [BucketEvent]?, metrics: ConsumeMetrics, logger: Logger,
         worker: String, capacity: Int) {
        self.queue = queue
        self.deadLetters = deadLetters
        self.scope = scope
        self.decode = decode
        self.metrics = metrics
        self.logger = logger
        self.worker = worker
        self.capacity = max(1, capacity)
    }

    // MARK: JobSource

    func next(waitingUpTo timeout: Double) -> JobSourceItem {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout))
        return monitor.withLock { locked in
            while locked.state.ready.isEmpty && !locked.state.stopped {
                if !locked.wait(seconds: deadline.timeIntervalSinceNow) { break }
            }
            if locked.state.stopped { return .ended }
            guard !locked.state.ready.isEmpty else { return .notYet }
            let job = locked.state.ready.removeFirst()
            locked.state.dealt[job.entry.path, default: []].append(job.messageID)
            return .job(job.entry)
        }
    }

    var remaining: Int? { nil }

    /// Messages held now (received, not yet deleted or released).
    var count: Int { monitor.withLock { $0.state.held.count } }

    /// Seconds since the receive loop last went round.
    var secondsSinceLoop: Double {
        monitor.withLock { ProcessInfo.processInfo.systemUptime - $0.state.lastLoop }
    }

    // MARK: Receiving

    /// The receive loop; returns after ``stop()``.
    func receiveLoop() {
        while true {
            // nil: stopped; 0: it waited (paused or full), so look again.
            let room: Int? = monitor.withLock { locked in
                locked.state.lastLoop = ProcessInfo.processInfo.systemUptime
                if locked.state.stopped { return nil }
                let now = wallNow()
                let pausedUntil = locked.state.pausedUntil
                if pausedUntil > now || locked.state.held.count >= capacity {
                    // Paused after a transient failure, or holding all it may: wait (a conclusion or stop wakes it).
                    locked.wait(seconds: min(pausedUntil > now ? pausedUntil : now + 1, now + 1) - wallNow())
                    return 0
                }
                return min(10, capacity - locked.state.held.count)
            }
            guard let room else { return }
            if room == 0 { continue }
            let messages: [QueueMessage]
            // A lease starts when the queue hands the message out: count it from before asking.
            let asked = wallNow()
            do {
                messages = try queue.receive(maximum: room, wait: 20, cancellation: cancellation)
            } catch is QueueCancelled {
                return
            } catch {
                let delay = backoff.next()
                logger.warning("cannot receive from the queue; retrying", metadata: [
                    "snap.queue": "\(queue.location)", "snap.error": "\(describe(error))", "snap.pause_s": "\(delay)"])
                pause(for: delay)
                continue
            }
            for message in messages { admit(message, leaseFrom: max(asked, wallNow() - 20)) }
        }
    }

    private func pause(for seconds: Double) {
        monitor.withLock { $0.state.pausedUntil = max($0.state.pausedUntil, wallNow() + seconds) }
    }

    /// Turns one message into jobs, or settles it at once when it has none.
    func admit(_ message: QueueMessage, leaseFrom: Double = wallNow()) {
        metrics.received.increment()
        if let deliveries = message.deliveries, deliveries > 1 { metrics.redeliveries.increment() }
        if let sentAt = message.sentAt { metrics.saw(age: max(0, wallNow() - sentAt)) }
        var meta: Logger.Metadata = ["snap.message_id": "\(message.id)"]
        if let deliveries = message.deliveries { meta["snap.deliveries"] = "\(deliveries)" }

        enum Seen { case afterStop, alreadyHeld, new }
        let seen = monitor.withLock { locked -> Seen in
            if locked.state.stopped { return .afterStop }
            guard var existing = locked.state.held[message.id] else { return .new }
            // Delivered again while this worker still holds it (its lease ran out): keep the newest receipt.
            existing.message = message
            existing.leaseUntil = leaseFrom + queue.leaseSeconds
            locked.state.held[message.id] = existing
            return .alreadyHeld
        }
        switch seen {
        case .afterStop:
            settle(Held(message: message, pending: 0, leaseUntil: 0, abandoned: true))
            return
        case .alreadyHeld:
            logger.debug("received a message this worker already holds; its work goes on", metadata: meta)
            return
        case .new:
            break
        }

        guard let events = decode(message) else {
            metrics.refused(ErrorCode.unsupported.rawValue)
            let error = SnapError(.unsupported, "the message is not a bucket event this queue carries (an S3 event notification, direct, through SNS or from EventBridge; a Cloud Storage notification through Pub/Sub)")
            var held = Held(message: message, pending: 0, leaseUntil: 0)
            held.refusals = [Refusal(key: nil, object: nil, error: error, body: String(message.body.prefix(200_000)))]
            settle(held)
            return
        }
        var jobs: [Job] = []
        var notes: [String] = []
        for event in events {
            switch event {
            case .objectCreated(let bucket, let objectKey, let size, let expected):
                switch scope.place(bucket: bucket, objectKey: objectKey) {
                case .upload(let key):
                    var entry = FileWalker.Entry(relativePath: key, path: scope.path(of: objectKey), size: size ?? 0)
                    // S3's events announce the size only: the worker refuses an object announced over
                    // --max-bytes before reading it, and one that is now of another size is superseded.
                    entry.expected = expected ?? size.map { SourceExpectation(size: Int64($0)) }
                    jobs.append(Job(entry: entry, messageID: message.id))
                case .outside:
                    notes.append("s3://\(bucket)/\(objectKey) is outside --source s3://\(scope.bucket)/\(scope.prefix)")
                case .ignored:
                    notes.append("s3://\(bucket)/\(objectKey) is a directory marker or dot-name (backfill skips it too)")
                }
            case .test(let bucket):
                notes.append("s3:TestEvent" + (bucket.map { " from \($0)" } ?? ""))
            case .other(let what):
                notes.append("not an object-created event (\(what))")
            }
        }
        guard !jobs.isEmpty else {
            metrics.ignored.increment()
            meta["snap.reason"] = "\(notes.joined(separator: "; "))"
            logger.info("ignored a message: nothing to make", metadata: meta)
            settle(Held(message: message, pending: 0, leaseUntil: 0))
            return
        }
        monitor.withLock { locked in
            locked.state.held[message.id] = Held(message: message, pending: jobs.count, leaseUntil: leaseFrom + queue.leaseSeconds)
            locked.state.ready.append(contentsOf: jobs)
            locked.broadcast()
        }
        if !notes.isEmpty {
            meta["snap.reason"] = "\(notes.joined(separator: "; "))"
            logger.info("ignored part of a message", metadata: meta)
        }
    }

    // MARK: Results

    /// Takes one job's end from the runner.
    func conclude(_ result: JobResult) {
        let entry = result.entry
        var meta: Logger.Metadata = ["snap.key": "\(entry.relativePath)", "snap.ms": "\(String(format: "%.1f", result.milliseconds))"]
        if result.attempts > 1 { meta["snap.attempts"] = "\(result.attempts)" }
        // dealt: false when this source did not give the runner that job; concluded: nil when its message is settled already.
        let (dealt, concluded) = monitor.withLock { locked -> (Bool, (id: String, message: Held)?) in
            guard var ids = locked.state.dealt[entry.path], !ids.isEmpty else { return (false, nil) }
            let id = ids.removeFirst()
            locked.state.dealt[entry.path] = ids.isEmpty ? nil : ids
            guard var message = locked.state.held[id] else { return (true, nil) }
            message.pending -= 1
            let refusal: SnapError?
            switch result.outcome {
            case .processed: refusal = nil
            case .skipped: refusal = nil
            case .failed(let error) where error.code == .superseded: refusal = nil
            case .failed(let error) where error.code.isTransient:
                refusal = nil
                message.transient = error
            case .failed(let error), .crashed(let error), .timedOut(let error): refusal = error
            case .abandoned:
                refusal = nil
                message.abandoned = true
            }
            if let refusal { message.refusals.append(Refusal(key: entry.relativePath, object: entry.path, error: refusal)) }
            if message.pending > 0 { locked.state.held[id] = message } else { locked.state.held[id] = nil }
            locked.broadcast()
            return (true, (id, message))
        }
        guard dealt else {
            logger.error("the runner reported a job this worker did not give it", metadata: meta)
            return
        }
        guard let concluded else { return }
        let (id, message) = concluded
        meta["snap.message_id"] = "\(id)"

        switch result.outcome {
        case .processed:
            metrics.published.increment()
            backoff.reset()
            if let digest = result.sourceDigest { meta["snap.digest"] = "\(digest)" }
            meta["snap.result"] = "ok"
            logger.info("processed", metadata: meta)
        case .skipped:
            metrics.repeats.increment()
            backoff.reset()
            meta["snap.result"] = "repeat"
            meta["snap.note"] = "repeat: this key was already published from the same source bytes"
            logger.info("processed", metadata: meta)
        case .failed(let error) where error.code == .superseded:
            // Not a failure: the newer generation's notification does the work.
            metrics.ignored.increment()
            meta["snap.result"] = "superseded"
            meta["snap.note"] = "\(error.message)"
            logger.info("superseded: acknowledged without work", metadata: meta)
        case .failed(let error) where error.code.isTransient:
            metrics.transient.increment()
            meta["snap.result"] = "retry"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            logger.warning("transient failure; the message stays on the queue and will be retried", metadata: meta)
        case .failed(let error), .crashed(let error), .timedOut(let error):
            metrics.refused(error.code.rawValue)
            meta["snap.result"] = "\(error.code.rawValue)"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            logger.warning("refused", metadata: meta)
        case .abandoned:
            break
        }
        if message.pending == 0 { settle(message) }
    }

    /// Ends a message that has no job left: release, dead-letter and delete, or leave it.
    /// Runs off the caller's thread (the runner's supervisors must not wait for the queue).
    private func settle(_ message: Held) {
        settling.enter()
        DispatchQueue.global().async { [self] in
            defer { settling.leave() }
            let meta: Logger.Metadata = ["snap.message_id": "\(message.message.id)"]
            if message.abandoned {
                do { try queue.setLease(message.message, seconds: 0) } catch {
                    logger.warning("cannot release a message; it comes back when its lease runs out", metadata: meta.merging(["snap.error": "\(describe(error))"]) { $1 })
                }
                return
            }
            var transient = message.transient
            for refusal in message.refusals {
                let letter = DeadLetter(key: refusal.key, code: refusal.error.code.rawValue, message: refusal.error.message,
                                        object: refusal.object, messageID: message.message.id, worker: worker, body: refusal.body)
                guard let deadLetters else {
                    logger.error("refused, and there is no dead-letter queue: deleting the message", metadata: meta.merging([
                        "snap.key": "\(refusal.key ?? "")", "snap.code": "\(letter.code)", "snap.error": "\(letter.message)"]) { $1 })
                    continue
                }
                do {
                    try deadLetters.send(letter)
                    logger.notice("sent to the dead-letter queue", metadata: meta.merging([
                        "snap.key": "\(refusal.key ?? "")", "snap.code": "\(letter.code)", "snap.dead_letter_queue": "\(deadLetters.location)"]) { $1 })
                } catch {
                    // The refusal is not recorded anywhere yet: the message must stay.
                    transient = SnapError(.store, "cannot send to the dead-letter queue: \(describe(error))")
                }
            }
            if let transient {
                let delay = backoff.next()
                pause(for: delay)
                do { try queue.setLease(message.message, seconds: delay) } catch {}
                logger.notice("left on the queue for a retry", metadata: meta.merging([
                    "snap.retry_in_s": "\(delay)", "snap.error": "\(transient.message)"]) { $1 })
                return
            }
            do { try queue.acknowledge(message.message) } catch {
                logger.warning("cannot delete a finished message; it will be delivered again (and be a repeat)", metadata: meta.merging([
                    "snap.error": "\(describe(error))"]) { $1 })
            }
        }
    }

    // MARK: Leases and shutdown

    /// Extends the lease of every held message past half its lease (call every second or so).
    func extendLeases() {
        let lease = queue.leaseSeconds
        let now = wallNow()
        let due = monitor.withLock { locked in
            var due: [QueueMessage] = []
            for (id, var message) in locked.state.held where message.leaseUntil - now < lease / 2 {
                message.leaseUntil = now + lease
                locked.state.held[id] = message
                due.append(message.message)
            }
            return due
        }
        for message in due {
            do { try queue.setLease(message, seconds: lease) } catch {
                logger.warning("cannot extend a message's lease; another worker may get it too (the store publishes once)", metadata: [
                    "snap.message_id": "\(message.id)", "snap.error": "\(describe(error))"])
            }
        }
    }

    /// Stops receiving (a long poll under way is cancelled) and releases the messages whose
    /// jobs the runner has not taken yet; jobs in flight end through ``conclude(_:)``.
    func stop() {
        let settled = monitor.withLock { locked in
            locked.state.stopped = true
            let left = locked.state.ready
            locked.state.ready = []
            var settled: [Held] = []
            for job in left {
                guard var message = locked.state.held[job.messageID] else { continue }
                message.pending -= 1
                message.abandoned = true
                if message.pending == 0 { locked.state.held[job.messageID] = nil; settled.append(message) } else { locked.state.held[job.messageID] = message }
            }
            locked.broadcast()
            return settled
        }
        // A receive whose answer is already on its way would lose that answer to a cancel (its
        // messages stay hidden for a whole visibility timeout): give it a moment to land (it is
        // then released); a long poll that is merely waiting is cancelled after that.
        DispatchQueue.global().asyncAfter(deadline: .now() + 1) { [cancellation] in cancellation.cancel() }
        for message in settled { settle(message) }
    }

    /// After the runner has returned: releases anything still held, and waits until every
    /// delete, release and dead letter under way is done.
    func finish() {
        let left = monitor.withLock { locked in
            let left = locked.state.held.values.map { message -> Held in var m = message; m.abandoned = true; return m }
            locked.state.held = [:]
            return left
        }
        for message in left { settle(message) }
        settling.wait()
    }

    /// Messages released at shutdown are counted by the caller from the log; this is for tests.
    var isStopped: Bool { monitor.withLock { $0.state.stopped } }
}
