import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbGoogle

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
        switch try? StorageNotification.parse(pubsub) {
        case nil: return nil
        case .upload(let upload)?:
            let expected = SourceExpectation(generation: upload.generation, size: upload.size, md5: upload.md5)
            return [.objectCreated(bucket: upload.bucket, key: upload.name, size: upload.size.map { Int($0) },
                                   expected: expected.isEmpty ? nil : expected)]
        case .ignored(let reason)?: return [.other(reason)]
        }
    }
}

/// A Pub/Sub dead-letter topic: one message per refused upload, the letter as JSON data
/// (as the SQS dead-letter queue gets it) and `snapthumb.key`, `snapthumb.code`,
/// `snapthumb.message`, `snapthumb.object`, `snapthumb.worker`, `snapthumb.messageId` as attributes.
public struct PubSubDeadLetters: DeadLetterSink {
    public let client: PubSubClient
    public let topic: PubSubTopic

    public init(client: PubSubClient, topic: PubSubTopic) {
        self.client = client
        self.topic = topic
    }

    public var location: String { topic.name }

    public func send(_ letter: DeadLetter) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(letter)
        let message = DeadLetterMessage.make(original: PubSubMessage(data: data, messageID: letter.messageID), key: letter.key,
                                             code: letter.code, message: letter.message, object: letter.object, worker: letter.worker)
        let (client, topic) = (self.client, self.topic)
        do { _ = try BlockingCall { try await client.publish(topic, [message]) }.wait() } catch let error as GoogleError { throw error.snapError }
    }
}
