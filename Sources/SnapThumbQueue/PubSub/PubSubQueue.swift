import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbGoogle
import SystemKit

/// A Pub/Sub subscription as the consumer's ``MessageQueue``: pull, acknowledge, and
/// modifyAckDeadline as the lease. The client is async; the runner's job source is a
/// thread, so each call runs as a ``BlockingCall`` (a long pull is cancelled at shutdown).
public struct PubSubQueue: MessageQueue {
    public let client: PubSubClient
    public let subscription: PubSubSubscription
    public let leaseSeconds: Double

    public init(client: PubSubClient, subscription: PubSubSubscription, leaseSeconds: Double) {
        self.client = client
        self.subscription = subscription
        self.leaseSeconds = leaseSeconds
    }

    public var location: String { subscription.url }

    public func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage] {
        let (client, subscription) = (self.client, self.subscription)
        let call = BlockingCall { try await client.pull(subscription, maxMessages: maximum, wait: wait) }
        let received: [ReceivedMessage]
        do {
            received = try cancellation.whileRegistered({ call.cancel() }) { try call.wait() }
        } catch is CancellationError {
            throw QueueCancelled()
        } catch let error as GoogleError {
            throw error.snapError
        }
        return received.map { received in
            let message = received.message
            return QueueMessage(id: message.messageID, receipt: received.ackID, body: String(decoding: message.data, as: UTF8.self),
                                attributes: message.attributes, deliveries: received.deliveryAttempt,
                                sentAt: message.publishDate?.timeIntervalSince1970)
        }
    }

    public func setLease(_ message: QueueMessage, seconds: Double) throws {
        let (client, subscription) = (self.client, self.subscription)
        let ackID = message.receipt
        try run(BlockingCall { try await client.modifyAckDeadline(subscription, ackIDs: [ackID], seconds: Int(seconds.rounded(.up))) })
    }

    public func acknowledge(_ message: QueueMessage) throws {
        let (client, subscription) = (self.client, self.subscription)
        let ackID = message.receipt
        try run(BlockingCall { try await client.acknowledge(subscription, ackIDs: [ackID]) })
    }

    private func run(_ call: BlockingCall<Void>) throws {
        do { try call.wait() } catch let error as GoogleError { throw error.snapError }
    }
}

/// Cloud Storage's notifications as the consumer's bucket events.
public enum StorageEventDecoder {
    /// Nil (refused as `unsupported`, dead-lettered) for a message that is not a Cloud Storage
    /// notification; OBJECT_FINALIZE as an object created; the other events as `other`.
    public static func decode(_ message: QueueMessage) -> [BucketEvent]? {
        let pubsub = PubSubMessage(data: Data(message.body.utf8), attributes: message.attributes, messageID: message.id)
        let attributes = message.attributes
        let origin = EventOrigin(name: attributes["eventType"], time: attributes["eventTime"], version: attributes["objectGeneration"])
        do {
            switch try StorageNotification.parse(pubsub) {
            case .upload(let upload):
                let expected = SourceExpectation(generation: upload.generation, size: upload.size, md5: upload.md5)
                var origin = origin
                origin.version = upload.generation.map { String($0) } ?? origin.version
                return [.objectCreated(bucket: upload.bucket, key: upload.name, size: upload.size.map { Int($0) },
                                       expected: expected.isEmpty ? nil : expected, origin: origin)]
            case .ignored(let reason): return [.other(reason)]
            }
        } catch let error as GoogleError {
            // Not a notification at all (no eventType): not a bucket event this queue carries.
            guard attributes["eventType"] != nil else { return nil }
            return [.unusable(bucket: attributes["bucketId"], key: attributes["objectId"], reason: error.message, origin: origin)]
        } catch {
            return nil
        }
    }
}

/// A Pub/Sub dead-letter topic: one message per refused upload, the letter as JSON data
/// (as the SQS dead-letter queue gets it) and as attributes: the original notification's
/// attributes (`bucketId`, `objectId`, `objectGeneration`, `eventTime`, … for a replay), then
/// `snapthumb.key`, `snapthumb.code`, `snapthumb.message`, `snapthumb.object`,
/// `snapthumb.worker`, `snapthumb.messageId` (each cut to Pub/Sub's 1024 bytes).
public struct PubSubDeadLetters: DeadLetterSink {
    public let client: PubSubClient
    public let topic: PubSubTopic

    public init(client: PubSubClient, topic: PubSubTopic) {
        self.client = client
        self.topic = topic
    }

    public var location: String { topic.name }

    /// The original attributes a letter keeps: Pub/Sub takes 100 a message, SnapThumb adds 6.
    static let maxOriginalAttributes = 94

    public func send(_ letter: DeadLetter) throws {
        let message = try Self.message(letter)
        let (client, topic) = (self.client, self.topic)
        do { _ = try BlockingCall { try await client.publish(topic, [message]) }.wait() } catch let error as GoogleError { throw error.snapError }
    }

    static func message(_ letter: DeadLetter) throws -> OutgoingMessage {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var attributes = letter.attributes ?? [:]
        // The S3-style identifying fields, when the original attributes do not carry them.
        if attributes["eventTime"] == nil, let time = letter.eventTime { attributes["eventTime"] = time }
        if attributes["bucketId"] == nil, let bucket = letter.bucket { attributes["bucketId"] = bucket }
        if attributes["objectGeneration"] == nil, let version = letter.version { attributes["objectGeneration"] = version }
        // Attribute names of at most 256 bytes, values of at most 1024 (Pub/Sub's limits).
        attributes = attributes.filter { !$0.key.isEmpty && $0.key.utf8.count <= 256 && !$0.key.hasPrefix("goog") && !$0.key.hasPrefix("snapthumb.") }
            .mapValues { DeadLetterMessage.clip($0) }
        // At most 100 attributes a message: the original's first (by name), leaving room for SnapThumb's.
        if attributes.count > maxOriginalAttributes {
            attributes = Dictionary(uniqueKeysWithValues: attributes.sorted { $0.key < $1.key }.prefix(maxOriginalAttributes).map { ($0.key, $0.value) })
        }
        let original = PubSubMessage(data: try encoder.encode(letter), attributes: attributes, messageID: letter.messageID)
        return DeadLetterMessage.make(original: original, key: letter.key, code: letter.code, message: letter.message,
                                      object: letter.object, worker: letter.worker)
    }
}
