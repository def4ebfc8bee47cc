import Foundation
import HTTPKit
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbS3
import SystemKit
import Synchronization

/// A small SQS client: AWS's JSON protocol (`POST /`, `X-Amz-Target: AmazonSQS.<Action>`,
/// `application/x-amz-json-1.0`), signed with the bucket's Signature Version 4 code
/// (service `sqs`), over the program's `HTTPTransport`. Calls block the calling thread and are
/// retried (capped exponential backoff with full jitter) on dropped connections, 5xx and
/// throttling; a long poll can be cancelled.
public final class SQSClient: Sendable {
    public let configuration: SQSConfiguration
    public let retry: RetryPolicy
    private let signer: SigV4Signer
    private let transport: HTTPTransport
    private let logger: Logger

    /// Seconds a long poll waits for a message (SQS's maximum).
    public static let longPoll = 20.0

    public init(configuration: SQSConfiguration, retry: RetryPolicy? = nil, logger: Logger = Logger(label: "snapthumb.sqs")) {
        self.configuration = configuration
        self.retry = retry ?? RetryPolicy(attempts: configuration.maxAttempts)
        self.logger = logger
        signer = SigV4Signer(credentials: configuration.credentials, region: configuration.region, service: "sqs")
        // Long polls hold a request open for 20 s; each request sets its own timeout.
        transport = HTTPTransport(timeout: Self.longPoll + 20, resourceTimeout: Self.longPoll + 40, maxConnections: 16)
    }

    /// The queue's attributes (`GetQueueAttributes`, all of them).
    public func attributes(of queueURL: String? = nil) throws -> [String: String] {
        let answer = try call("GetQueueAttributes", ["QueueUrl": queueURL ?? configuration.queueURL, "AttributeNames": ["All"]])
        return answer["Attributes"] as? [String: String] ?? [:]
    }

    /// The URL of a queue named in an ARN (`arn:aws:sqs:<region>:<account>:<name>`), as
    /// `GetQueueUrl` gives it.
    public func queueURL(forARN arn: String) throws -> String {
        let parts = arn.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 6, parts[0] == "arn", parts[2] == "sqs" else {
            throw SnapError(.config, "\(configuration.name): the redrive policy names \"\(arn)\", which is not an SQS queue ARN")
        }
        var parameters: [String: Any] = ["QueueName": parts[5]]
        if !parts[4].isEmpty { parameters["QueueOwnerAWSAccountId"] = parts[4] }
        guard let url = try call("GetQueueUrl", parameters)["QueueUrl"] as? String else {
            throw SnapError(.store, "\(configuration.name): GetQueueUrl for \(arn) gave no URL")
        }
        return url
    }

    /// `ReceiveMessage`: up to `maximum` (1-10) messages, waiting up to `wait` seconds.
    /// Each body is checked against the MD5 the queue sent with it; a message whose body
    /// does not match is left alone (it comes back after its visibility timeout).
    /// `visibility` hides what is received for that many seconds (nil: the queue's VisibilityTimeout).
    public func receive(maximum: Int, wait: Double, visibility: Int? = nil, cancellation: ReceiveCancellation) throws -> [QueueMessage] {
        let waitSeconds = Int(max(0, min(Self.longPoll, wait)).rounded())
        var parameters: [String: Any] = [
            "QueueUrl": configuration.queueURL, "MaxNumberOfMessages": max(1, min(10, maximum)), "WaitTimeSeconds": waitSeconds,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount", "SentTimestamp"],
            "AttributeNames": ["ApproximateReceiveCount", "SentTimestamp"],
        ]
        if let visibility { parameters["VisibilityTimeout"] = max(0, min(43_200, visibility)) }
        let answer = try call("ReceiveMessage", parameters, timeout: Double(waitSeconds) + 20, cancellation: cancellation)
        var messages: [QueueMessage] = []
        for item in answer["Messages"] as? [[String: Any]] ?? [] {
            guard let id = item["MessageId"] as? String, let receipt = item["ReceiptHandle"] as? String,
                  let body = item["Body"] as? String else { continue }
            if let md5 = item["MD5OfBody"] as? String, md5.lowercased() != Self.hex(MD5.digest(Array(body.utf8))) {
                logger.error("a message's body does not match its MD5; leaving it for redelivery", metadata: [
                    "snap.queue": "\(configuration.name)", "snap.message_id": "\(id)"])
                continue
            }
            let attributes = item["Attributes"] as? [String: String] ?? [:]
            messages.append(QueueMessage(
                id: id, receipt: receipt, body: body, deliveries: attributes["ApproximateReceiveCount"].flatMap { Int($0) },
                sentAt: attributes["SentTimestamp"].flatMap { Double($0) }.map { $0 / 1000 }))
        }
        return messages
    }

    /// `ChangeMessageVisibility`.
    public func changeVisibility(receipt: String, seconds: Int) throws {
        _ = try call("ChangeMessageVisibility", ["QueueUrl": configuration.queueURL, "ReceiptHandle": receipt,
                                                 "VisibilityTimeout": max(0, min(43_200, seconds))])
    }

    /// `DeleteMessage`.
    public func delete(receipt: String) throws {
        _ = try call("DeleteMessage", ["QueueUrl": configuration.queueURL, "ReceiptHandle": receipt])
    }

    /// `SendMessage` to `queueURL` (this client's queue when nil); returns the message id.
    @discardableResult
    public func send(body: String, attributes: [String: String] = [:], to queueURL: String? = nil) throws -> String {
        var parameters: [String: Any] = ["QueueUrl": queueURL ?? configuration.queueURL, "MessageBody": body]
        if !attributes.isEmpty {
            parameters["MessageAttributes"] = attributes.mapValues { ["DataType": "String", "StringValue": $0] }
        }
        return try call("SendMessage", parameters)["MessageId"] as? String ?? ""
    }

    // MARK: Requests

    private static let throttling: Set<String> = [
        "ThrottlingException", "RequestThrottled", "AWS.SimpleQueueService.RequestThrottled", "KmsThrottled",
        "ServiceUnavailable", "InternalError", "InternalFailure", "RequestTimeout",
    ]
    private static let missing: Set<String> = ["QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue"]
    private static let refused: Set<String> = [
        "AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "SignatureDoesNotMatch", "InvalidSignatureException",
        "UnrecognizedClientException", "IncompleteSignature", "MissingAuthenticationToken", "ExpiredToken",
    ]

    /// One action of the JSON protocol: its answer as a JSON object. Errors: `config` for a
    /// queue that does not exist or refused credentials, `store` for anything else (after
    /// retries where a retry can help).
    public func call(_ action: String, _ parameters: [String: Any], timeout: Double = 30,
                     cancellation: ReceiveCancellation? = nil) throws -> [String: Any] {
        let body = Array((try? JSONSerialization.data(withJSONObject: parameters, options: [.sortedKeys])) ?? Data("{}".utf8))
        let endpoint = configuration.endpoint
        var host = endpoint.host ?? ""
        if let port = endpoint.port { host += ":\(port)" }
        guard let url = URL(string: "\(endpoint.scheme ?? "https")://\(host)/") else {
            throw SnapError(.config, "\(configuration.name): cannot make a URL from the endpoint \(endpoint.absoluteString)")
        }
        let payloadHash = SHA256.hex(body)
        return try retry.executor.run({ (_: Int) -> RetryStep<[String: Any], String> in
            if cancellation?.isCancelled == true { throw QueueCancelled() }
            let headers: [(String, String)] = [("Host", host), ("Content-Type", "application/x-amz-json-1.0"),
                                               ("X-Amz-Target", "AmazonSQS.\(action)")]
            let signed = signer.sign(SigV4Signer.Request(method: "POST", path: "/", headers: headers, payloadHash: payloadHash), at: Date())
            let request = HTTPRequest(method: "POST", url: url, headers: signed.filter { $0.0.lowercased() != "host" }, body: Data(body))
            switch perform(request, timeout: timeout, cancellation: cancellation) {
            case .failure(let error):
                if cancellation?.isCancelled == true { throw QueueCancelled() }
                let failure = HTTPTransport.describe(error)
                guard HTTPTransport.isRetryable(error) else { throw SnapError(.store, "\(configuration.name): \(action): \(failure)") }
                return .retry(failure)
            case .success(let response):
                let (status, data) = (response.status, response.body)
                let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
                if (200..<300).contains(status) { return .finished(object) }
                let code = Self.errorCode(object)
                let failure = "HTTP \(status)" + (code.map { " \($0)" } ?? "") + ((object["message"] ?? object["Message"]).map { ": \(redact("\($0)"))" } ?? "")
                if let code, Self.missing.contains(code) {
                    throw SnapError(.config, "\(configuration.queueURL(for: parameters["QueueUrl"])): no such queue (\(failure))")
                }
                if status == 403 || status == 401 || code.map(Self.refused.contains) == true {
                    throw SnapError(.config, "\(configuration.name): \(action) refused (\(failure)); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, the region and the queue's policy")
                }
                // Worth another try: the server's own failures and throttling.
                guard status >= 500 || status == 429 || code.map(Self.throttling.contains) == true else {
                    throw SnapError(.store, "\(configuration.name): \(action): \(failure)")
                }
                return .retry(failure)
            }
        }, retrying: { attempt, failure in
            logger.debug("sqs request failed, retrying", metadata: ["snap.action": "\(action)", "snap.attempt": .number(attempt), "snap.error": "\(failure)"])
        }, exhausted: { failure, attempts in
            throw SnapError(.store, "\(configuration.name): \(action) failed \(attempts) times: \(failure ?? "")")
        })
    }

    /// `__type` of a JSON error (`com.amazonaws.sqs#QueueDoesNotExist` gives `QueueDoesNotExist`).
    static func errorCode(_ object: [String: Any]) -> String? {
        guard let type = (object["__type"] ?? object["code"] ?? object["Code"]) as? String else { return nil }
        return type.split(separator: "#").last.map(String.init) ?? type
    }

    private func perform(_ request: HTTPRequest, timeout: Double, cancellation: ReceiveCancellation?) -> Result<HTTPResponse, any Error> {
        let call = transport.start(request, timeout: timeout)
        guard let cancellation else { return call.wait() }
        return cancellation.whileRegistered({ call.cancel() }) { call.wait() }
    }


    /// Removes anything of the credentials from text a server sent back.
    func redact(_ text: String) -> String {
        var text = text
        let credentials = configuration.credentials
        for secret in [credentials.secretAccessKey, credentials.sessionToken ?? "", credentials.accessKeyID] where secret.count >= 4 {
            text = text.replacingOccurrences(of: secret, with: "<redacted>")
        }
        return text
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}

/// A receive that shutdown cancelled.
public struct QueueCancelled: Error, Sendable {}

extension SQSConfiguration {
    fileprivate func queueURL(for parameter: Any?) -> String { parameter as? String ?? queueURL }
}

/// An SQS queue as the consumer's ``MessageQueue``.
public struct SQSQueue: MessageQueue {
    public let client: SQSClient
    public let leaseSeconds: Double

    public init(client: SQSClient, leaseSeconds: Double) {
        self.client = client
        self.leaseSeconds = leaseSeconds
    }

    public var location: String { client.configuration.queueURL }

    public func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage] {
        // The lease this consumer extends by is the one the receive starts with (--visibility-timeout may differ from the queue's).
        try client.receive(maximum: maximum, wait: wait, visibility: Int(leaseSeconds.rounded(.up)), cancellation: cancellation)
    }

    public func setLease(_ message: QueueMessage, seconds: Double) throws {
        try client.changeVisibility(receipt: message.receipt, seconds: Int(seconds.rounded(.up)))
    }

    public func acknowledge(_ message: QueueMessage) throws { try client.delete(receipt: message.receipt) }
}

/// An SQS dead-letter queue: one JSON message per refused upload (key, code, message,
/// object, the event's bucket, version, time and name, the original message id, the worker;
/// the original body for a message refused whole), with `code` and `key` also as message
/// attributes for filtering. SQS takes only some characters (no NUL nor other control
/// characters but tab, newline and return) and 256 KiB a message: attribute values are
/// sanitised, and the body cut in bytes until the whole message fits.
public struct SQSDeadLetters: DeadLetterSink {
    public let client: SQSClient
    public let queueURL: String
    /// The most bytes of one message, body and attributes (SQS's default maximum, 256 KiB).
    public static let maxMessageBytes = 256 * 1024

    public init(client: SQSClient, queueURL: String) {
        self.client = client
        self.queueURL = queueURL
    }

    public var location: String { queueURL }

    public func send(_ letter: DeadLetter) throws {
        let (body, attributes) = try Self.message(letter)
        try client.send(body: body, attributes: attributes, to: queueURL)
    }

    /// The message for a letter: its JSON (control characters escaped by JSON itself) and the
    /// attributes, together within ``maxMessageBytes``.
    static func message(_ letter: DeadLetter) throws -> (body: String, attributes: [String: String]) {
        var attributes = ["code": sanitised(letter.code)]
        if let key = letter.key { attributes["key"] = sanitised(key) }
        let attributeBytes = attributes.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + "String".utf8.count }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var letter = letter
        while true {
            // JSON escapes control characters itself; U+FFFE and U+FFFF (which SQS refuses) are escaped here.
            let body = jsonEscapingNoncharacters(String(decoding: try encoder.encode(letter), as: UTF8.self))
            let size = body.utf8.count + attributeBytes
            if size <= maxMessageBytes { return (body, attributes) }
            // Only the original body can be that long: cut it by what is over (JSON escapes count more than once).
            guard let original = letter.body, original.utf8.count > 3 else {
                throw SnapError(.internal, "a dead letter of \(size) bytes without a body to shorten")
            }
            letter.body = PathBytes.prefix(original, maxBytes: max(0, original.utf8.count - (size - maxMessageBytes) - 1024)) + "…"
        }
    }

    /// The JSON text with every scalar SQS refuses in a body written as a JSON escape (`\\uFFFF`):
    /// outside strings JSON is ASCII, so only string contents change, and they decode the same.
    static func jsonEscapingNoncharacters(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: { !isAllowed($0) }) else { return json }
        var out = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if isAllowed(scalar) { out.append(scalar) } else {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).unicodeScalars)
            }
        }
        return String(out)
    }

    /// The characters SQS takes in a body or a string attribute.
    static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v == 0x9 || v == 0xA || v == 0xD || (0x20...0xD7FF).contains(v) || (0xE000...0xFFFD).contains(v) || v >= 0x10000
    }

    /// What SQS takes in a string attribute: #x9, #xA, #xD, #x20 to #xD7FF, #xE000 to #xFFFD and
    /// #x10000 up; anything else as a `\u{…}` escape, so that the letter still says what it was.
    static func sanitised(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isAllowed(scalar) { out.append(scalar) } else { out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".unicodeScalars) }
        }
        return String(out)
    }
}
