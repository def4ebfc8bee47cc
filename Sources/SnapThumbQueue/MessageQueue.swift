import Foundation
import SnapThumbCore
import SnapThumbStore
import Synchronization

/// One message as a queue delivered it. The same shape serves SQS (a receipt handle,
/// `ApproximateReceiveCount`) and a Pub/Sub subscription (an ack id, `deliveryAttempt`,
/// attributes).
public struct QueueMessage: Sendable, Equatable {
    /// The queue's id of the message: the same on every delivery of it.
    public let id: String
    /// What acknowledges or extends this delivery (SQS receipt handle, Pub/Sub ack id):
    /// a new one on every delivery.
    public let receipt: String
    public let body: String
    /// Message attributes (Pub/Sub carries a notification's event type there).
    public let attributes: [String: String]
    /// How many times the queue has delivered it, this delivery included, when known.
    public let deliveries: Int?
    /// When it was first sent to the queue (Unix seconds), when known.
    public let sentAt: Double?

    public init(id: String, receipt: String, body: String, attributes: [String: String] = [:], deliveries: Int? = nil, sentAt: Double? = nil) {
        self.id = id
        self.receipt = receipt
        self.body = body
        self.attributes = attributes
        self.deliveries = deliveries
        self.sentAt = sentAt
    }
}

/// Lets a blocked receive (a 20 s long poll) return early at shutdown.
public final class ReceiveCancellation: Sendable {
    private struct State {
        var cancelled = false
        var handlers: [Int: @Sendable () -> Void] = [:]
        var next = 0
    }
    private let state = Mutex(State())

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Cancels, once: every registered handler runs.
    public func cancel() {
        let all: [@Sendable () -> Void] = state.withLock { state in
            guard !state.cancelled else { return [] }
            state.cancelled = true
            defer { state.handlers = [:] }
            return Array(state.handlers.values)
        }
        for handler in all { handler() }
    }

    /// Runs `handler` on cancellation (at once if already cancelled) until `body` returns.
    public func whileRegistered<T>(_ handler: @escaping @Sendable () -> Void, _ body: () throws -> T) rethrows -> T {
        let id: Int? = state.withLock { state in
            guard !state.cancelled else { return nil }
            let id = state.next
            state.next += 1
            state.handlers[id] = handler
            return id
        }
        guard let id else { handler(); return try body() }
        defer { _ = state.withLock { $0.handlers.removeValue(forKey: id) } }
        return try body()
    }
}

/// A queue of upload notifications that several workers share, with leases: a received
/// message is hidden from the others until it is acknowledged (gone for good), its lease
/// runs out, or it is released (visible again at once). SQS implements it; a Pub/Sub
/// subscription can (pull, acknowledge, modifyAckDeadline).
///
/// Errors are `SnapError`s: `config` for what a retry cannot fix (no such queue, refused
/// credentials), `store` for a queue that could not be reached after retries.
public protocol MessageQueue: Sendable {
    /// The queue's name for logs: never a credential.
    var location: String { get }
    /// Seconds a received message stays hidden (SQS: the queue's visibility timeout;
    /// Pub/Sub: the ack deadline).
    var leaseSeconds: Double { get }
    /// Up to `maximum` messages, waiting up to `wait` seconds for the first (long polling).
    func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage]
    /// Keeps the message hidden for `seconds` more from now (0: visible again at once).
    func setLease(_ message: QueueMessage, seconds: Double) throws
    /// Removes the message for good: it was handled.
    func acknowledge(_ message: QueueMessage) throws
}

/// One upload refused with a code: what a dead-letter queue receives.
public struct DeadLetter: Sendable, Codable, Equatable {
    /// The upload's key (relative to `--source`), or nil for a message that named no upload.
    public var key: String?
    public var code: String
    public var message: String
    /// Where the object is: `s3://bucket/object-key`.
    public var object: String?
    /// The queue message it came from.
    public var messageID: String
    /// The worker that refused it.
    public var worker: String
    /// The original message body, for a message refused as a whole (not an event, too many
    /// records, a record that names no object), cut to ``maxBodyBytes``.
    public var body: String?
    /// The event's bucket, as the event names it.
    public var bucket: String?
    /// The object's version the event names: S3's `versionId`, Cloud Storage's generation.
    public var version: String?
    /// When the bucket says the event happened, as it wrote it.
    public var eventTime: String?
    /// The event's name (`ObjectCreated:Put`, `OBJECT_FINALIZE`).
    public var event: String?
    /// The original message's attributes (Pub/Sub: the notification's), for a replay.
    public var attributes: [String: String]?

    /// The most bytes of the original body a letter carries (SQS takes 256 KiB per message by default).
    public static let maxBodyBytes = 64 * 1024
    /// The most bytes of the message (and of the key) a letter carries.
    public static let maxMessageBytes = 4 * 1024

    public init(key: String?, code: String, message: String, object: String?, messageID: String, worker: String, body: String? = nil,
                bucket: String? = nil, version: String? = nil, eventTime: String? = nil, event: String? = nil, attributes: [String: String]? = nil) {
        self.key = key
        self.code = code
        self.message = message
        self.object = object
        self.messageID = messageID
        self.worker = worker
        self.body = body
        self.bucket = bucket
        self.version = version
        self.eventTime = eventTime
        self.event = event
        self.attributes = attributes
    }
}

/// Where refused uploads go (an SQS dead-letter queue; a Pub/Sub dead-letter topic).
public protocol DeadLetterSink: Sendable {
    var location: String { get }
    /// Sends one letter durably (returns once the queue has it); throws otherwise.
    func send(_ letter: DeadLetter) throws
}
