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
///     → decode events (more than `maxRecords`: refused whole, one letter)
///     → one job per upload under --source, records of one object and version once
///       (nothing: delete, one log line; a created-object record naming no object: a letter)
///     → the runner's worker processes publish (group commit: durable)
///     → every job of the message ended:
///         published or repeat ........................ delete
///         superseded (replaced or deleted first) ...... delete, one log line
///         refused with a code ........................ dead-letter queue, then delete
///         transient (store, source unreachable) ....... leave it: visible again after its own
///                                                       backoff (by its delivery count); no letter
///                                                       yet (its retry refuses again, and letters then)
///         abandoned at shutdown ...................... release (visible again at once)
///
/// Receiving pauses only when the queue or the dead-letter queue fails, or uploads fail
/// transiently three in a row (the store or the bucket is failing for everyone): one object's
/// failure delays only its own message. Messages held
/// longer than half their lease get it extended. A message is deleted only after all of that:
/// a worker killed with -9 loses nothing, its messages come back.
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
    /// The pause of all receiving after a failure of the queue or the store itself.
    private let backoff = Backoff()

    /// Records one message may carry: S3, SNS, EventBridge and Cloud Storage send one; more than
    /// this is no producer's, and the message is refused whole with one letter.
    static let maxRecords = 100
    /// Transient failures (store or bucket unreachable, store full) of different messages in a
    /// row, with no upload published between them, that pause receiving: one or two are those
    /// objects' own, more say the store (or the source bucket) is failing for everyone.
    static let failuresToPause = 3
    /// What a log value or letter field holds at most, in bytes.
    static let maxLogValueBytes = 1024
    /// Deliveries remembered (letters sent, uploads published) to count each once.
    static let memory = 4096

    /// All the mutable state; the runner waits on it for jobs.
    private let monitor = Monitor(State())
    private let cancellation = ReceiveCancellation()
    /// Deletes, releases and dead letters under way (they run off the runner's threads).
    private let settling = DispatchGroup()

    private struct State {
        var ready: [Job] = []
        /// Held messages by message id.
        var held: [String: Held] = [:]
        /// The message id of each job given to the runner, by the job's id.
        var dealt: [JobID: String] = [:]
        var stopped = false
        var pausedUntil = 0.0
        /// When the receive loop last went round (uptime seconds), for the watchdog.
        var lastLoop = monotonicNow()
        /// Transient failures since the last upload published or repeated.
        var failuresInARow = 0
        /// Letters sent (message id, key, code): a message retried after a failed letter sends each once.
        var lettersSent = Recent<String>(limit: QueueSource.memory)
        /// Uploads published lately (key and source digest): a second delivery of one is a repeat.
        var published = Recent<String>(limit: QueueSource.memory)
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
        var bucket: String? = nil
        var origin: EventOrigin? = nil
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
        /// The object and version of each job, by source path (for its letter).
        var origins: [String: (bucket: String, origin: EventOrigin)] = [:]
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

    func next(waitingUpTo timeout: Double, id: JobID) -> JobSourceItem {
        let deadline = monotonicNow() + max(0, timeout)
        return monitor.withLock { locked in
            while locked.state.ready.isEmpty && !locked.state.stopped {
                if !locked.wait(seconds: deadline - monotonicNow()) { break }
            }
            if locked.state.stopped { return .ended }
            guard !locked.state.ready.isEmpty else { return .notYet }
            let job = locked.state.ready.removeFirst()
            locked.state.dealt[id] = job.messageID
            return .job(job.entry)
        }
    }

    var remaining: Int? { nil }

    /// Messages held now (received, not yet deleted or released).
    var count: Int { monitor.withLock { $0.state.held.count } }

    /// Seconds since the receive loop last went round.
    var secondsSinceLoop: Double {
        monitor.withLock { monotonicNow() - $0.state.lastLoop }
    }

    // MARK: Receiving

    /// The receive loop; returns after ``stop()``.
    func receiveLoop() {
        while true {
            // nil: stopped; 0: it waited (paused or full), so look again.
            let room: Int? = monitor.withLock { locked in
                locked.state.lastLoop = monotonicNow()
                if locked.state.stopped { return nil }
                let now = monotonicNow()
                let pausedUntil = locked.state.pausedUntil
                if pausedUntil > now || locked.state.held.count >= capacity {
                    // Paused after a transient failure, or holding all it may: wait (a conclusion or stop wakes it).
                    locked.wait(seconds: min(pausedUntil > now ? pausedUntil : now + 1, now + 1) - monotonicNow())
                    return 0
                }
                return min(10, capacity - locked.state.held.count)
            }
            guard let room else { return }
            if room == 0 { continue }
            let messages: [QueueMessage]
            // A lease starts when the queue hands the message out: count it from before asking.
            let asked = monotonicNow()
            do {
                messages = try queue.receive(maximum: room, wait: 20, cancellation: cancellation)
            } catch is QueueCancelled {
                return
            } catch {
                let delay = backoff.next()
                logger.warning("cannot receive from the queue; retrying", metadata: [
                    "snap.queue": "\(queue.location)", "snap.error": "\(Self.bounded(describe(error)))", "snap.pause_s": .number(delay, places: 3)])
                pause(for: delay)
                continue
            }
            for message in messages { admit(message, leaseFrom: max(asked, monotonicNow() - 20)) }
        }
    }

    private func pause(for seconds: Double) {
        monitor.withLock { $0.state.pausedUntil = max($0.state.pausedUntil, monotonicNow() + seconds) }
    }

    /// Turns one message into jobs, or settles it at once when it has none.
    func admit(_ message: QueueMessage, leaseFrom: Double = monotonicNow()) {
        metrics.received.increment()
        if let deliveries = message.deliveries, deliveries > 1 { metrics.redeliveries.increment() }
        if let sentAt = message.sentAt { metrics.saw(age: max(0, wallNow() - sentAt)) }
        var meta: Logger.Metadata = ["snap.message_id": "\(message.id)"]
        if let deliveries = message.deliveries { meta["snap.deliveries"] = .number(deliveries) }

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

        /// The whole message refused with one letter that carries its body.
        func refuseWhole(_ error: SnapError) {
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(Self.bounded(error.message))"
            logger.warning("refused a message", metadata: meta)
            var held = Held(message: message, pending: 0, leaseUntil: 0)
            held.refusals = [Refusal(key: nil, object: nil, error: error, body: Self.bounded(message.body, DeadLetter.maxBodyBytes))]
            settle(held)
        }
        guard let events = decode(message) else {
            refuseWhole(SnapError(.unsupported, "the message is not a bucket event this queue carries (an S3 event notification, direct, through SNS or from EventBridge; a Cloud Storage notification through Pub/Sub)"))
            return
        }
        guard events.count <= Self.maxRecords else {
            refuseWhole(SnapError(.unsupported, "the message carries \(events.count) records; a bucket sends one per message, and this consumer takes at most \(Self.maxRecords)"))
            return
        }
        var jobs: [Job] = []
        var refusals: [Refusal] = []
        var origins: [String: (bucket: String, origin: EventOrigin)] = [:]
        var notes = Notes()
        /// Object, version or sequencer: a record repeated in one message makes one job.
        var records = Set<[String]>()
        for event in events {
            switch event {
            case .objectCreated(let bucket, let objectKey, let size, let expected, let origin):
                guard records.insert([bucket, objectKey, origin.version ?? origin.sequencer ?? ""]).inserted else {
                    notes.append("s3://\(bucket)/\(objectKey) repeated in the message")
                    continue
                }
                switch scope.place(bucket: bucket, objectKey: objectKey) {
                case .upload(let key):
                    var entry = FileWalker.Entry(relativePath: key, path: scope.path(of: objectKey), size: size ?? 0)
                    // S3's events announce the size only: the worker refuses an object announced over
                    // --max-bytes before reading a byte of it.
                    entry.expected = expected ?? size.map { SourceExpectation(size: Int64($0)) }
                    if jobs.contains(where: { $0.entry.path == entry.path }) {
                        // Another version of the same object in one message: the object is read as it is now, once.
                        notes.append("s3://\(bucket)/\(objectKey) repeated in the message")
                        continue
                    }
                    jobs.append(Job(entry: entry, messageID: message.id))
                    origins[entry.path] = (bucket, origin)
                case .outside:
                    notes.append("s3://\(bucket)/\(objectKey) is outside --source s3://\(scope.bucket)/\(scope.prefix)")
                case .ignored:
                    notes.append("s3://\(bucket)/\(objectKey) is a directory marker or dot-name (backfill skips it too)")
                }
            case .unusable(let bucket, let key, let reason, let origin):
                let object = key.map { "s3://\(bucket ?? "?")/\($0)" }
                guard records.insert(["unusable", bucket ?? "", key ?? "", reason]).inserted else { continue }
                refusals.append(Refusal(key: nil, object: object.map { Self.bounded($0) }, error: SnapError(.unsupported, reason),
                                        body: Self.bounded(message.body, DeadLetter.maxBodyBytes), bucket: bucket, origin: origin))
            case .test(let bucket):
                notes.append("s3:TestEvent" + (bucket.map { " from \($0)" } ?? ""))
            case .other(let what):
                notes.append("not an object-created event (\(what))")
            }
        }
        for refusal in refusals {
            logger.warning("refused", metadata: meta.merging([
                "snap.object": "\(refusal.object ?? "none")", "snap.code": "\(refusal.error.code.rawValue)",
                "snap.error": "\(Self.bounded(refusal.error.message))"]) { $1 })
        }
        guard !jobs.isEmpty else {
            if refusals.isEmpty { metrics.ignored.increment() }
            if !notes.isEmpty || refusals.isEmpty {
                meta["snap.reason"] = "\(notes.text)"
                logger.info("ignored a message: nothing to make", metadata: meta)
            }
            var held = Held(message: message, pending: 0, leaseUntil: 0)
            held.refusals = refusals
            settle(held)
            return
        }
        monitor.withLock { locked in
            var held = Held(message: message, pending: jobs.count, leaseUntil: leaseFrom + queue.leaseSeconds)
            held.refusals = refusals
            held.origins = origins
            locked.state.held[message.id] = held
            locked.state.ready.append(contentsOf: jobs)
            locked.broadcast()
        }
        if !notes.isEmpty {
            meta["snap.reason"] = "\(notes.text)"
            logger.info("ignored part of a message", metadata: meta)
        }
    }

    /// Reasons for a log line: the first few, each bounded, and how many more.
    struct Notes {
        private(set) var items: [String] = []
        private(set) var more = 0
        mutating func append(_ note: String) {
            if items.count < 5 { items.append(QueueSource.bounded(note, 300)) } else { more += 1 }
        }
        var isEmpty: Bool { items.isEmpty }
        var text: String { items.joined(separator: "; ") + (more > 0 ? "; and \(more) more" : "") }
    }

    /// `text` in at most `bytes` UTF-8 bytes, cut on a scalar boundary and ending in "…" when cut:
    /// log values, letter fields. (The log handlers escape control characters themselves; SQS
    /// letters are sanitised by `SQSDeadLetters`.)
    static func bounded(_ text: String, _ bytes: Int = maxLogValueBytes) -> String {
        guard text.utf8.count > bytes else { return text }
        return PathBytes.prefix(text, maxBytes: max(0, bytes - 3)) + "…"
    }

    // MARK: Results

    /// Takes one job's end from the runner.
    func conclude(_ result: JobResult) {
        let entry = result.entry
        var meta: Logger.Metadata = ["snap.key": "\(Self.bounded(entry.relativePath))", "snap.ms": .number(result.milliseconds)]
        if result.attempts > 1 { meta["snap.attempts"] = .number(result.attempts) }
        let verdict = result.verdict
        // dealt: false when this source did not give the runner that job; concluded: nil when its message is settled already.
        var repeated = false
        let (dealt, concluded) = monitor.withLock { locked -> (Bool, (id: String, message: Held)?) in
            guard let job = result.id, let id = locked.state.dealt.removeValue(forKey: job) else { return (false, nil) }
            guard var message = locked.state.held[id] else { return (true, nil) }
            message.pending -= 1
            var refusal: SnapError?
            switch verdict {
            case .published, .repeated: locked.state.failuresInARow = 0
            case .superseded: break
            case .transient(let error):
                message.transient = error
                locked.state.failuresInARow += 1
            case .refused(let error, _): refusal = error
            case .abandoned: message.abandoned = true
            }
            if let refusal {
                let origin = message.origins[entry.path]
                message.refusals.append(Refusal(key: entry.relativePath, object: entry.path, error: refusal, bucket: origin?.bucket, origin: origin?.origin))
            }
            // The same upload published twice from the same bytes (two deliveries at once, each
            // taken before the other was published): the second is a repeat.
            if case .published(_, let digest?, _) = verdict, !locked.state.published.insert("\(entry.path)\u{0}\(digest)") {
                repeated = true
            }
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

        switch verdict {
        case .published where repeated:
            metrics.repeats.increment()
            backoff.reset()
            meta["snap.result"] = "repeat"
            meta["snap.note"] = "repeat: another delivery of this upload was published from the same bytes moments ago"
            logger.info("processed", metadata: meta)
        case .published(_, let digest, _):
            metrics.published.increment()
            backoff.reset()
            if let digest { meta["snap.digest"] = "\(digest)" }
            meta["snap.result"] = "ok"
            logger.info("processed", metadata: meta)
        case .repeated:
            metrics.repeats.increment()
            backoff.reset()
            meta["snap.result"] = "repeat"
            meta["snap.note"] = "repeat: this key was already published from the same source bytes"
            logger.info("processed", metadata: meta)
        case .superseded(let error):
            // Not a failure: the newer generation's notification does the work.
            metrics.ignored.increment()
            meta["snap.result"] = "superseded"
            meta["snap.note"] = "\(Self.bounded(error.message))"
            logger.info("superseded: acknowledged without work", metadata: meta)
        case .transient(let error):
            metrics.transient.increment()
            meta["snap.result"] = "retry"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(Self.bounded(error.message))"
            logger.warning("transient failure; the message stays on the queue and will be retried", metadata: meta)
        case .refused(let error, _):
            // Counted when its message ends for good (a retried message refuses it again).
            meta["snap.result"] = "\(error.code.rawValue)"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(Self.bounded(error.message))"
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
                    logger.warning("cannot release a message; it comes back when its lease runs out", metadata: meta.merging(["snap.error": "\(Self.bounded(describe(error)))"]) { $1 })
                }
                return
            }
            if let transient = message.transient {
                // Its letters wait: the retry refuses the same uploads again, and sends them once it is settled for good.
                leaveForRetry(message, because: transient, pauseAll: monitor.withLock { $0.state.failuresInARow } >= Self.failuresToPause)
                return
            }
            for refusal in message.refusals {
                let letter = self.letter(refusal, of: message.message)
                let id = "\(message.message.id)\u{0}\(refusal.key ?? refusal.object ?? "")\u{0}\(letter.code)"
                if monitor.withLock({ $0.state.lettersSent.contains(id) }) { continue }
                guard let deadLetters else {
                    metrics.refused(letter.code)
                    logger.error("refused, and there is no dead-letter queue: deleting the message", metadata: meta.merging([
                        "snap.key": "\(letter.key ?? "")", "snap.object": "\(letter.object ?? "")", "snap.code": "\(letter.code)", "snap.error": "\(Self.bounded(letter.message))"]) { $1 })
                    continue
                }
                do {
                    try deadLetters.send(letter)
                    _ = monitor.withLock { $0.state.lettersSent.insert(id) }
                    metrics.refused(letter.code)
                    logger.notice("sent to the dead-letter queue", metadata: meta.merging([
                        "snap.key": "\(letter.key ?? "")", "snap.code": "\(letter.code)", "snap.dead_letter_queue": "\(deadLetters.location)"]) { $1 })
                } catch {
                    // The refusal is not recorded anywhere yet: the message must stay. The dead-letter queue
                    // is the queue's own failure: receiving pauses too.
                    leaveForRetry(message, because: SnapError(.store, "cannot send to the dead-letter queue: \(describe(error))"), pauseAll: true)
                    return
                }
            }
            do { try queue.acknowledge(message.message) } catch {
                logger.warning("cannot delete a finished message; it will be delivered again (and be a repeat)", metadata: meta.merging([
                    "snap.error": "\(Self.bounded(describe(error)))"]) { $1 })
            }
        }
    }

    /// Hides the message for its own backoff (by how often it was delivered) and, for a failure
    /// of the queue or the store itself, pauses all receiving as long.
    private func leaveForRetry(_ message: Held, because error: SnapError, pauseAll: Bool) {
        var meta: Logger.Metadata = ["snap.message_id": "\(message.message.id)"]
        let delay = Self.retryDelay(deliveries: message.message.deliveries)
        if pauseAll {
            let pause = backoff.next()
            self.pause(for: pause)
            meta["snap.pause_s"] = "\(pause)"
        }
        do { try queue.setLease(message.message, seconds: delay) } catch {
            logger.warning("cannot set a message's retry delay; it comes back when its lease runs out", metadata: meta.merging([
                "snap.error": "\(Self.bounded(describe(error)))"]) { $1 })
        }
        logger.notice(pauseAll ? "left on the queue for a retry; receiving pauses (the store or the queue is failing)" : "left on the queue for a retry",
                      metadata: meta.merging(["snap.retry_in_s": .number(delay, places: 3), "snap.error": "\(Self.bounded(error.message))"]) { $1 })
    }

    /// A message's own retry delay: 1 s after its first delivery, doubling with each one, at most 60 s.
    static func retryDelay(deliveries: Int?) -> Double {
        let n = max(1, min(deliveries ?? 1, 7))
        return min(60, Double(1 << (n - 1)))
    }

    /// The letter for one refusal: the reason, and what identifies the event (bucket, object,
    /// version, event time and name; Pub/Sub: the original attributes), every field bounded.
    func letter(_ refusal: Refusal, of message: QueueMessage) -> DeadLetter {
        DeadLetter(key: refusal.key.map { Self.bounded($0) }, code: refusal.error.code.rawValue,
                   message: Self.bounded(refusal.error.message, DeadLetter.maxMessageBytes), object: refusal.object.map { Self.bounded($0) },
                   messageID: message.id, worker: worker, body: refusal.body, bucket: refusal.bucket.map { Self.bounded($0) },
                   version: refusal.origin?.version.map { Self.bounded($0, 256) }, eventTime: refusal.origin?.time.map { Self.bounded($0, 256) },
                   event: refusal.origin?.name.map { Self.bounded($0, 256) }, attributes: message.attributes.isEmpty ? nil : message.attributes)
    }

    // MARK: Leases and shutdown

    /// Extends the lease of every held message past half its lease (call every second or so).
    func extendLeases() {
        let lease = queue.leaseSeconds
        let now = monotonicNow()
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
                    "snap.message_id": "\(message.id)", "snap.error": "\(Self.bounded(describe(error)))"])
            }
        }
    }

    /// Stops receiving and releases the messages whose jobs the runner has not taken yet; jobs
    /// in flight end through ``conclude(_:)``. A long poll under way is let finish (what it
    /// brings is released at once) for up to `pollGrace` seconds, then cancelled: cancelling
    /// one whose answer is on its way would leave that answer's messages hidden for a lease.
    func stop(pollGrace: Double = 1) {
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
        DispatchQueue.global().asyncAfter(deadline: .now() + max(0, pollGrace)) { [cancellation] in cancellation.cancel() }
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

    /// Waits until the deletes, releases and letters under way are done, holding on to the rest (for tests).
    func waitForSettling() { settling.wait() }

    /// Whether receiving is paused now (for tests).
    var isPaused: Bool { monitor.withLock { $0.state.pausedUntil > monotonicNow() } }
}

/// The last `limit` distinct values inserted (the oldest forgotten first).
struct Recent<Value: Hashable> {
    let limit: Int
    private var set = Set<Value>()
    private var order: [Value] = []
    private var start = 0

    init(limit: Int) { self.limit = max(1, limit) }

    func contains(_ value: Value) -> Bool { set.contains(value) }

    /// False when it was there already.
    mutating func insert(_ value: Value) -> Bool {
        guard set.insert(value).inserted else { return false }
        order.append(value)
        if order.count - start > limit {
            set.remove(order[start])
            start += 1
            if start > limit { order.removeFirst(start); start = 0 }
        }
        return true
    }
}
