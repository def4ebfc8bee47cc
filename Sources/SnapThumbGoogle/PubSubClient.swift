import Foundation
import HTTPKit
import Logging
import SnapThumbConfig

/// Where Pub/Sub's REST API is, and whether requests carry an access token.
public struct PubSubEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// `scheme://host[:port]`, no path.
    public let baseURL: URL
    /// The emulator takes no credentials; Google's service requires them.
    public let authenticated: Bool

    public static let google = PubSubEndpoint(baseURL: URL(string: "https://pubsub.googleapis.com")!, authenticated: true)

    public init(baseURL: URL, authenticated: Bool) {
        self.baseURL = baseURL
        self.authenticated = authenticated
    }

    /// `PUBSUB_EMULATOR_HOST` (`host:port`, as `gcloud beta emulators pubsub env-init` prints
    /// it; or the config file's `google.pubsubEmulatorHost`): the emulator over plain HTTP,
    /// without credentials. Otherwise Google's service.
    public static func resolve(cloud: CloudSettings) throws -> PubSubEndpoint {
        guard let setting = cloud.pubsubEmulatorHost else { return .google }
        let host = setting.value
        guard !host.contains("/"), let url = URL(string: "http://\(host)"), url.host != nil, url.path.isEmpty else {
            throw GoogleError(.invalid, "\(setting): expected host:port")
        }
        return PubSubEndpoint(baseURL: url, authenticated: false)
    }

    public var description: String { authenticated ? baseURL.absoluteString : "the Pub/Sub emulator at \(baseURL.absoluteString)" }
}

/// A client of Pub/Sub's REST API (v1): pull, acknowledge, modifyAckDeadline, publish,
/// and the few administrative calls that set up topics and subscriptions. Calls are
/// async; cancelling the task cancels the request in flight (a long pull included).
/// Transient failures (unreachable, 429, 5xx) are retried with backoff; an answer of
/// 401 fetches a new token once.
public final class PubSubClient: Sendable {
    public let endpoint: PubSubEndpoint
    public let tokens: AccessTokenProvider?
    public let retry: GoogleRetryPolicy
    private let transport: HTTPTransport
    private let logger: Logger

    /// The largest batch of ack ids one request carries (Pub/Sub caps a request at 512 kB).
    public static let maxAckIDsPerRequest = 1000
    /// The longest ack deadline Pub/Sub accepts, in seconds.
    public static let maxAckDeadline = 600

    /// - Parameter tokens: required when `endpoint.authenticated`.
    public init(endpoint: PubSubEndpoint, tokens: AccessTokenProvider?, retry: GoogleRetryPolicy = GoogleRetryPolicy(),
                transport: HTTPTransport = HTTPTransport(timeout: 30), logger: Logger = Logger(label: "snapthumb.pubsub")) {
        self.endpoint = endpoint
        self.tokens = endpoint.authenticated ? tokens : nil
        self.retry = retry
        self.transport = transport
        self.logger = logger
    }

    /// The client the settings describe: the emulator (`PUBSUB_EMULATOR_HOST`), or Google's
    /// service with Application Default Credentials (`GoogleCredentials.tokenSource`).
    public static func configured(_ cloud: CloudSettings, retry: GoogleRetryPolicy = GoogleRetryPolicy(),
                                       logger: Logger = Logger(label: "snapthumb.pubsub")) throws -> PubSubClient {
        let endpoint = try PubSubEndpoint.resolve(cloud: cloud)
        let tokens = endpoint.authenticated ? AccessTokenProvider(source: try GoogleCredentials.tokenSource(cloud: cloud), logger: logger) : nil
        return PubSubClient(endpoint: endpoint, tokens: tokens, retry: retry, logger: logger)
    }

    // MARK: Receiving

    /// Up to `maxMessages` messages (at most 1000). Waits up to `wait` seconds for the first
    /// one and returns an empty batch if none came (`wait` 0 asks the server not to wait).
    /// A pull given up on may have leased messages that were on their way: Pub/Sub delivers
    /// them again after the subscription's ack deadline.
    public func pull(_ subscription: PubSubSubscription, maxMessages: Int = 10, wait: Double = 20) async throws -> [ReceivedMessage] {
        let body = PubSubWire.PullRequest(maxMessages: min(max(1, maxMessages), 1000), returnImmediately: wait <= 0 ? true : nil)
        let data: Data
        do {
            data = try await call("POST", subscription.name, verb: "pull", body: body, what: "pull from \(subscription)", timeout: wait <= 0 ? nil : wait, emptyOnTimeout: true)
        } catch PullTimedOut.timedOut {
            return []
        }
        let response = try decode(PubSubWire.PullResponse.self, from: data, what: "pull from \(subscription)")
        return try (response.receivedMessages ?? []).map { received in
            ReceivedMessage(ackID: received.ackId, message: try message(received.message, what: "pull from \(subscription)"), deliveryAttempt: received.deliveryAttempt)
        }
    }

    /// Acknowledges deliveries: Pub/Sub will not deliver those messages again (an expired ack id is ignored by the server).
    public func acknowledge(_ subscription: PubSubSubscription, ackIDs: [String]) async throws {
        for chunk in Self.chunks(ackIDs) {
            _ = try await call("POST", subscription.name, verb: "acknowledge", body: PubSubWire.AckRequest(ackIds: chunk), what: "acknowledge on \(subscription)")
        }
    }

    /// Sets the deliveries' ack deadline to `seconds` from now (0-600): longer while an upload is
    /// still being worked on, 0 to hand them back at once for another worker.
    public func modifyAckDeadline(_ subscription: PubSubSubscription, ackIDs: [String], seconds: Int) async throws {
        let seconds = min(max(0, seconds), Self.maxAckDeadline)
        for chunk in Self.chunks(ackIDs) {
            _ = try await call("POST", subscription.name, verb: "modifyAckDeadline", body: PubSubWire.ModifyRequest(ackIds: chunk, ackDeadlineSeconds: seconds),
                               what: "modifyAckDeadline on \(subscription)")
        }
    }

    // MARK: Publishing

    /// Publishes the messages (at most 1000 a call) and returns their message ids, in order.
    /// A retried publish may publish twice: Pub/Sub is at-least-once on this side too.
    @discardableResult
    public func publish(_ topic: PubSubTopic, _ messages: [OutgoingMessage]) async throws -> [String] {
        guard !messages.isEmpty else { return [] }
        guard messages.count <= 1000 else { throw GoogleError(.invalid, "publish to \(topic): \(messages.count) messages, at most 1000 a request") }
        for message in messages where message.data.isEmpty && message.attributes.isEmpty {
            throw GoogleError(.invalid, "publish to \(topic): a message needs data or attributes")
        }
        let wire = messages.map { PubSubWire.Message(data: $0.data.isEmpty ? nil : $0.data.base64EncodedString(), attributes: $0.attributes.isEmpty ? nil : $0.attributes) }
        let data = try await call("POST", topic.name, verb: "publish", body: PubSubWire.PublishRequest(messages: wire), what: "publish to \(topic)")
        let ids = try decode(PubSubWire.PublishResponse.self, from: data, what: "publish to \(topic)").messageIds ?? []
        guard ids.count == messages.count else { throw GoogleError(.invalid, "publish to \(topic): \(ids.count) message ids for \(messages.count) messages") }
        return ids
    }

    // MARK: Administration

    /// The subscription's topic, ack deadline and dead-letter policy (`notFound` when there is none:
    /// a start-up check that the name is right and these credentials may see it).
    public func subscription(_ subscription: PubSubSubscription) async throws -> SubscriptionInfo {
        let data = try await call("GET", subscription.name, body: Optional<PubSubWire.Empty>.none, what: "get \(subscription)")
        let wire = try decode(PubSubWire.Subscription.self, from: data, what: "get \(subscription)")
        return try SubscriptionInfo(subscription: subscription, topic: wire.topic ?? "", ackDeadlineSeconds: wire.ackDeadlineSeconds ?? 10,
                                    deadLetterTopic: wire.deadLetterPolicy?.deadLetterTopic.flatMap { $0.isEmpty ? nil : try PubSubTopic(name: $0) },
                                    maxDeliveryAttempts: wire.deadLetterPolicy?.maxDeliveryAttempts)
    }

    /// Creates a topic (`invalid` with status 409 when it exists).
    public func createTopic(_ topic: PubSubTopic) async throws {
        _ = try await call("PUT", topic.name, body: PubSubWire.Empty(), what: "create \(topic)", retryable: false)
    }

    /// Creates a pull subscription to `topic` (`invalid` with status 409 when it exists).
    /// - Parameter deadLetter: where Pub/Sub moves a message delivered `maxDeliveryAttempts` (5-100) times.
    public func createSubscription(_ subscription: PubSubSubscription, topic: PubSubTopic, ackDeadlineSeconds: Int = 10,
                                   deadLetter: (topic: PubSubTopic, maxDeliveryAttempts: Int)? = nil) async throws {
        let body = PubSubWire.Subscription(topic: topic.name, ackDeadlineSeconds: ackDeadlineSeconds,
                                           deadLetterPolicy: deadLetter.map { PubSubWire.DeadLetterPolicy(deadLetterTopic: $0.topic.name, maxDeliveryAttempts: $0.maxDeliveryAttempts) })
        _ = try await call("PUT", subscription.name, body: body, what: "create \(subscription)", retryable: false)
    }

    public func deleteSubscription(_ subscription: PubSubSubscription) async throws {
        _ = try await call("DELETE", subscription.name, body: Optional<PubSubWire.Empty>.none, what: "delete \(subscription)")
    }

    public func deleteTopic(_ topic: PubSubTopic) async throws {
        _ = try await call("DELETE", topic.name, body: Optional<PubSubWire.Empty>.none, what: "delete \(topic)")
    }

    // MARK: Requests

    private enum PullTimedOut: Error { case timedOut }

    /// Sends one call, retrying what may be retried; returns the body of a 2xx answer.
    /// `verb` is a custom method (`pull`, `publish`…): `/v1/NAME:VERB`, the colon as is.
    private func call<Body: Encodable>(_ method: String, _ name: String, verb: String? = nil, body: Body?, what: String, timeout: Double? = nil,
                                       retryable: Bool = true, emptyOnTimeout: Bool = false) async throws -> Data {
        guard let url = URL(string: endpoint.baseURL.absoluteString + "/v1/" + PubSubNames.path(name) + (verb.map { ":" + $0 } ?? "")) else {
            throw GoogleError(.invalid, "\(what): cannot make a URL")
        }
        var headers: [(String, String)] = [("Accept", "application/json")]
        var payload: Data?
        if let body {
            payload = try JSONEncoder().encode(body)
            headers.append(("Content-Type", "application/json"))
        }
        var refreshedToken = false
        return try await retry.executor.run({ (attempt: Int) async throws -> RetryStep<Data, GoogleError> in
            var request = HTTPRequest(method: method, url: url, headers: headers, body: payload)
            if let tokens {
                request.headers.append(("Authorization", try await tokens.token().authorization))
            }
            let response: HTTPResponse
            do {
                response = try await transport.send(request, timeout: timeout)
            } catch let error as CancellationError {
                throw error
            } catch let error as HTTPError where emptyOnTimeout && error.kind == .timedOut {
                throw PullTimedOut.timedOut
            } catch {
                let failure = GoogleError(.unavailable, "\(endpoint): \(what): \(HTTPTransport.describe(error))")
                guard retryable, HTTPTransport.isRetryable(error) else { throw failure }
                logger.debug("pubsub request failed, retrying", metadata: ["pubsub.call": "\(what)", "attempt": "\(attempt)", "error": "\(failure.message)"])
                return .retry(failure, announce: false)
            }
            if (200 ..< 300).contains(response.status) { return .finished(response.body) }
            let failure = describe(response, what: what)
            if response.status == 401, tokens != nil, !refreshedToken {
                // A token revoked or expired early: one new token, one more try (not counted).
                tokens?.invalidate()
                refreshedToken = true
                return .repeatAttempt(failure)
            }
            guard retryable, GoogleRetry.isRetryable(status: response.status) else { throw failure }
            logger.debug("pubsub request failed, retrying", metadata: ["pubsub.call": "\(what)", "attempt": "\(attempt)", "error": "\(failure.message)"])
            return .retry(failure, announce: false)
        }, exhausted: { failure, _ in
            throw GoogleError(.unavailable, "\(failure?.message ?? what) (\(retry.attempts) attempts)", status: failure?.status)
        })
    }

    /// Status, Google's status name and message (which never echo the request's token).
    private func describe(_ response: HTTPResponse, what: String) -> GoogleError {
        let detail = (try? JSONDecoder().decode(PubSubWire.ErrorBody.self, from: response.body))?.error
        var text = "\(endpoint): \(what): HTTP \(response.status)"
        if let status = detail?.status { text += " \(status)" }
        if let message = detail?.message, !message.isEmpty { text += ": \(message)" }
        let kind: GoogleError.Kind
        switch response.status {
        case 401, 403: kind = .refused
        case 404: kind = .notFound
        case 408, 429, 500...: kind = .unavailable
        default: kind = .invalid
        }
        return GoogleError(kind, text, status: response.status)
    }

    private func decode<T: Decodable>(_ type: T.Type, from data: Data, what: String) throws -> T {
        do { return try JSONDecoder().decode(type, from: data.isEmpty ? Data("{}".utf8) : data) } catch {
            throw GoogleError(.invalid, "\(endpoint): \(what): an answer that is not the expected JSON")
        }
    }

    private func message(_ wire: PubSubWire.Message, what: String) throws -> PubSubMessage {
        var data = Data()
        if let text = wire.data, !text.isEmpty {
            guard let decoded = Data(base64Encoded: text) else { throw GoogleError(.invalid, "\(endpoint): \(what): message data that is not base64") }
            data = decoded
        }
        return PubSubMessage(data: data, attributes: wire.attributes ?? [:], messageID: wire.messageId ?? "", publishTime: wire.publishTime)
    }

    static func chunks(_ ids: [String]) -> [[String]] {
        stride(from: 0, to: ids.count, by: maxAckIDsPerRequest).map { Array(ids[$0 ..< min($0 + maxAckIDsPerRequest, ids.count)]) }
    }
}
