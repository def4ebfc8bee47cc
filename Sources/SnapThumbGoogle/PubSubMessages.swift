import Foundation

/// A message as Pub/Sub delivers it.
public struct PubSubMessage: Sendable, Equatable {
    /// The payload (base64 on the wire, decoded here).
    public let data: Data
    public let attributes: [String: String]
    public let messageID: String
    /// RFC 3339, as the server wrote it.
    public let publishTime: String?

    public init(data: Data, attributes: [String: String] = [:], messageID: String = "", publishTime: String? = nil) {
        self.data = data
        self.attributes = attributes
        self.messageID = messageID
        self.publishTime = publishTime
    }

    /// `publishTime` as a date (to the second: Google writes up to nine fractional digits,
    /// the emulator three; the message's age needs no more).
    public var publishDate: Date? {
        guard let text = publishTime, text.hasSuffix("Z") else { return nil }
        let whole = text.prefix { $0 != "." && $0 != "Z" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: whole + "Z")
    }
}

/// One message of a pull, with what it takes to acknowledge it.
public struct ReceivedMessage: Sendable, Equatable {
    /// Acknowledges (or extends) this delivery only; a redelivery has another.
    public let ackID: String
    public let message: PubSubMessage
    /// 1 for the first delivery; set only when the subscription has a dead-letter policy.
    public let deliveryAttempt: Int?
}

/// A message to publish.
public struct OutgoingMessage: Sendable, Equatable {
    public var data: Data
    public var attributes: [String: String]

    public init(data: Data = Data(), attributes: [String: String] = [:]) {
        self.data = data
        self.attributes = attributes
    }
}

/// What `subscription(_:)` reads of a subscription.
public struct SubscriptionInfo: Sendable, Equatable {
    public let subscription: PubSubSubscription
    /// `projects/P/topics/T`, or `_deleted-topic_`.
    public let topic: String
    public let ackDeadlineSeconds: Int
    /// Where Pub/Sub itself moves a message after `maxDeliveryAttempts`.
    public let deadLetterTopic: PubSubTopic?
    public let maxDeliveryAttempts: Int?
}

/// The JSON of Pub/Sub's REST API (v1), as far as SnapThumb uses it.
enum PubSubWire {
    struct Message: Codable {
        var data: String?
        var attributes: [String: String]?
        var messageId: String?
        var publishTime: String?
    }

    struct Received: Decodable {
        var ackId: String
        var message: Message
        var deliveryAttempt: Int?
    }

    struct PullRequest: Encodable {
        var maxMessages: Int
        var returnImmediately: Bool?
    }

    struct PullResponse: Decodable {
        var receivedMessages: [Received]?
    }

    struct AckRequest: Encodable {
        var ackIds: [String]
    }

    struct ModifyRequest: Encodable {
        var ackIds: [String]
        var ackDeadlineSeconds: Int
    }

    struct PublishRequest: Encodable {
        var messages: [Message]
    }

    struct PublishResponse: Decodable {
        var messageIds: [String]?
    }

    struct DeadLetterPolicy: Codable {
        var deadLetterTopic: String?
        var maxDeliveryAttempts: Int?
    }

    struct Subscription: Codable {
        var name: String?
        var topic: String?
        var ackDeadlineSeconds: Int?
        var deadLetterPolicy: DeadLetterPolicy?
    }

    struct Empty: Codable {}

    struct ErrorBody: Decodable {
        struct Detail: Decodable {
            var code: Int?
            var message: String?
            var status: String?
        }
        var error: Detail?
    }
}
