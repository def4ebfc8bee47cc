import ArgumentParser
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbGoogle
import SnapThumbQueue

/// `snapthumb redrive DLQ --to QUEUE`: once the cause of refusals is fixed, each dead letter
/// goes back to the work queue as the bucket event it came from, and is deleted only after
/// that send succeeded.
struct RedriveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "redrive",
        abstract: "Send refused uploads from a dead-letter queue back to the work queue, once their cause is fixed.",
        discussion: """
        Each message of DLQ is read as consume writes its letters (JSON with code, key, object, message…; other fields are ignored) and turned back into the bucket event it came from: an S3 ObjectCreated notification for the object s3://BUCKET/KEY the letter names, sent to --to (an SQS queue URL); or, from a Pub/Sub dead-letter subscription (gcppubsub://projects/P/subscriptions/S), a Cloud Storage OBJECT_FINALIZE notification published to --to (projects/P/topics/T), for the object's current generation. A message that is already a bucket event (moved by the queue's own redrive policy, or forwarded by Pub/Sub's dead-lettering) is sent as it is. A letter is deleted (acknowledged) only after its event was sent; a letter that names no upload (a message that was no event at all) stays, and is listed.

        --dry-run lists what would be sent and changes nothing (the messages become visible again at once). One line per message on stdout: 'sent', 'would send' or 'left', the object, the code. Exit 0 when every letter that names an upload was sent; 1 when a send failed (those letters stay); 2 when a queue cannot be reached.

        Credentials, region and endpoints as for consume (AWS_*, PUBSUB_EMULATOR_HOST, GOOGLE_APPLICATION_CREDENTIALS, the config file's s3, sqs and google sections). See docs/fleet.md, "Replaying the dead-letter queue".
        """
    )

    @Argument(help: ArgumentHelp("The dead-letter queue's URL (SQS), or a Pub/Sub subscription of the dead-letter topic (gcppubsub://projects/P/subscriptions/S).", valueName: "dlq"))
    var deadLetterQueue: String

    @Option(name: .long, help: ArgumentHelp("Where the events go: the work queue's URL (SQS), or the topic the bucket's notifications are published to (projects/P/topics/T).", valueName: "queue"))
    var to: String

    @Flag(name: .long, help: "List what would be sent; send and delete nothing.")
    var dryRun = false

    @Option(name: .long, help: ArgumentHelp("Config file (its s3, sqs, google and log sections). [env SNAPTHUMB_CONFIG]", valueName: "file"))
    var config: String?

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    func run() async throws {
        let environment = ProcessEnvironment.values
        let file: ConfigFile?
        do { file = try ConfigLayers.loadFile(flag: config, environment: environment) } catch let error as SnapError {
            throw ValidationError(error.message)
        }
        try logging.bootstrap(file: file)
        let logger = Logger(label: "snapthumb.redrive")
        let cloud: CloudSettings
        do { cloud = try CloudSettings.resolve(ConfigLayers(flags: [:], environment: environment, file: file)) } catch {
            throw startupFailure("the cloud settings", error)
        }
        let counts: Redrive.Counts
        if deadLetterQueue.hasPrefix("gcppubsub://") {
            let subscription: PubSubSubscription
            do {
                guard let parsed = try PubSubSubscription.parseURL(deadLetterQueue) else { throw ValidationError("") }
                subscription = parsed
            } catch {
                throw ValidationError("the dead-letter subscription must be gcppubsub://projects/PROJECT/subscriptions/NAME (got '\(deadLetterQueue)'): \((error as? GoogleError)?.snapError.message ?? "")")
            }
            let topic: PubSubTopic
            do { topic = try PubSubTopic(name: to) } catch {
                throw ValidationError("--to must be the notifications' topic, projects/PROJECT/topics/NAME, for a Pub/Sub subscription (got '\(to)')")
            }
            counts = try await pubSub(subscription, topic: topic, cloud: cloud, logger: logger)
        } else {
            counts = try sqs(cloud: cloud, logger: logger)
        }
        logger.info(dryRun ? "redrive dry run finished" : "redrive finished", metadata: [
            "snap.sent": .number(counts.sent), "snap.left": .number(counts.left), "snap.failed": .number(counts.failed)])
        if counts.failed > 0 { throw ExitCode(1) }
    }

    private func startupFailure(_ what: String, _ error: any Error) -> ExitCode {
        let message = (error as? SnapError)?.message ?? (error as? GoogleError)?.snapError.message ?? describe(error)
        printError("redrive: \(what): \(message)")
        return ExitCode(2)
    }

    /// SQS: receive (hidden for a minute while working), send each event to --to, then delete;
    /// what stays is made visible again at the end.
    private func sqs(cloud: CloudSettings, logger: Logger) throws -> Redrive.Counts {
        let client: SQSClient
        do {
            client = SQSClient(configuration: try SQSConfiguration(queueURL: deadLetterQueue, cloud: cloud), logger: logger)
            _ = try client.attributes()
        } catch { throw startupFailure("the dead-letter queue", error) }
        do { _ = try client.attributes(of: to) } catch { throw startupFailure("--to", error) }

        var counts = Redrive.Counts()
        var seen = Set<String>()
        var kept: [QueueMessage] = []
        while true {
            let batch: [QueueMessage]
            do { batch = try client.receive(maximum: 10, wait: 1, visibility: 60, cancellation: ReceiveCancellation()) } catch {
                logger.error("cannot receive from the dead-letter queue", metadata: ["snap.error": "\(describe(error))"])
                counts.failed += 1
                break
            }
            let fresh = batch.filter { seen.insert($0.id).inserted }
            if fresh.isEmpty { break }
            for message in fresh {
                let plan = Redrive.plan(sqsBody: message.body)
                switch plan {
                case .leave(let reason):
                    printOut("left\t\(message.id)\t\(reason)")
                    counts.left += 1
                    kept.append(message)
                case .send(let event):
                    if dryRun {
                        printOut("would send\t\(event.object)\t\(event.code ?? "-")")
                        counts.sent += 1
                        kept.append(message)
                        continue
                    }
                    do {
                        try client.send(body: event.body, attributes: ["snapthumb.redrive": message.id], to: to)
                    } catch {
                        logger.error("cannot send; the letter stays", metadata: ["snap.object": "\(event.object)", "snap.error": "\(describe(error))"])
                        counts.failed += 1
                        kept.append(message)
                        continue
                    }
                    // Sent: only now may the letter go. A delete that fails leaves a duplicate event, which the store makes a repeat.
                    do { try client.delete(receipt: message.receipt) } catch {
                        logger.warning("sent, but the letter could not be deleted: it will be sent again by the next redrive (a repeat)",
                                       metadata: ["snap.object": "\(event.object)", "snap.error": "\(describe(error))"])
                    }
                    printOut("sent\t\(event.object)\t\(event.code ?? "-")")
                    counts.sent += 1
                }
            }
        }
        for message in kept { try? client.changeVisibility(receipt: message.receipt, seconds: 0) }
        return counts
    }

    /// Pub/Sub: pull from the dead-letter subscription, publish each notification to --to,
    /// then acknowledge; what stays gets an ack deadline of 0 (delivered again at once).
    private func pubSub(_ subscription: PubSubSubscription, topic: PubSubTopic, cloud: CloudSettings, logger: Logger) async throws -> Redrive.Counts {
        let client: PubSubClient
        do {
            client = try PubSubClient.configured(cloud, logger: logger)
            _ = try await client.subscription(subscription)
        } catch { throw startupFailure("the dead-letter subscription", error) }

        var counts = Redrive.Counts()
        var seen = Set<String>()
        var kept: [String] = []
        // A pull may come back empty while messages wait (they are spread over servers, and a
        // message handed back takes a moment to return), and a pull given up on at its timeout
        // may have leased messages that come back only at the ack deadline (10 s unless the
        // subscription says otherwise): it ends after three empty pulls in a row spanning at
        // least 12 s.
        var empty = 0
        let clock = ContinuousClock()
        var quietSince = clock.now
        while true {
            let batch: [ReceivedMessage]
            do { batch = try await client.pull(subscription, maxMessages: 10, wait: 4) } catch {
                logger.error("cannot pull from the dead-letter subscription", metadata: ["snap.error": "\(describe(error))"])
                counts.failed += 1
                break
            }
            let fresh = batch.filter { seen.insert($0.message.messageID).inserted }
            kept += batch.filter { !fresh.contains($0) }.map(\.ackID)
            if fresh.isEmpty {
                empty += 1
                if empty >= 3 && clock.now - quietSince >= .seconds(12) { break }
                try? await Task.sleep(for: .seconds(1))
                continue
            }
            empty = 0
            quietSince = clock.now
            for received in fresh {
                switch Redrive.plan(pubSub: received.message) {
                case .leave(let reason):
                    printOut("left\t\(received.message.messageID)\t\(reason)")
                    counts.left += 1
                    kept.append(received.ackID)
                case .send(let event):
                    if dryRun {
                        printOut("would send\t\(event.object)\t\(event.code ?? "-")")
                        counts.sent += 1
                        kept.append(received.ackID)
                        continue
                    }
                    var attributes = event.attributes
                    attributes["snapthumb.redrive"] = received.message.messageID
                    do {
                        _ = try await client.publish(topic, [OutgoingMessage(data: Data(event.body.utf8), attributes: attributes)])
                    } catch {
                        logger.error("cannot publish; the letter stays", metadata: ["snap.object": "\(event.object)", "snap.error": "\(describe(error))"])
                        counts.failed += 1
                        kept.append(received.ackID)
                        continue
                    }
                    do { try await client.acknowledge(subscription, ackIDs: [received.ackID]) } catch {
                        logger.warning("published, but the letter could not be acknowledged: it will be sent again by the next redrive (a repeat)",
                                       metadata: ["snap.object": "\(event.object)", "snap.error": "\(describe(error))"])
                    }
                    printOut("sent\t\(event.object)\t\(event.code ?? "-")")
                    counts.sent += 1
                }
            }
        }
        if !kept.isEmpty {
            do { try await client.modifyAckDeadline(subscription, ackIDs: kept, seconds: 0) } catch {
                logger.warning("the letters kept could not be handed back at once; they return at their ack deadline",
                               metadata: ["snap.count": "\(kept.count)", "snap.error": "\(describe(error))"])
            }
        }
        return counts
    }
}

/// What a dead-letter message turns back into (pure: tested through the command).
enum Redrive {
    struct Counts { var sent = 0, left = 0, failed = 0 }

    struct Event {
        /// The body (SQS) or data (Pub/Sub) to send.
        var body: String
        var attributes: [String: String] = [:]
        /// `s3://bucket/key`, for the listing.
        var object: String
        /// The refusal's code, when it was a letter.
        var code: String?
    }

    enum Plan {
        case send(Event)
        case leave(String)
    }

    /// A letter's fields, read tolerantly: unknown fields ignored, only `object` (`s3://BUCKET/KEY`) needed.
    static func letterObject(_ json: [String: Any]) -> (bucket: String, key: String, code: String?)? {
        guard let object = json["object"] as? String, object.hasPrefix("s3://") else { return nil }
        let rest = object.dropFirst("s3://".count)
        guard let slash = rest.firstIndex(of: "/"), slash != rest.startIndex, rest.index(after: slash) != rest.endIndex else { return nil }
        return (String(rest[..<slash]), String(rest[rest.index(after: slash)...]), json["code"] as? String)
    }

    static func plan(sqsBody body: String) -> Plan {
        let json = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        if let json, json["code"] is String, json["Records"] == nil {
            guard let (bucket, key, code) = letterObject(json) else {
                return .leave("a letter that names no upload (code \(json["code"] as? String ?? "?")): the message it came from was no bucket event")
            }
            return .send(Event(body: s3Event(bucket: bucket, key: key), object: "s3://\(bucket)/\(key)", code: code))
        }
        // Not a letter: an event the queue's own redrive policy moved here goes back as it is.
        if let events = S3EventDecoder.decode(body), let first = events.first {
            if case .objectCreated(let bucket, let key, _, _, _) = first {
                return .send(Event(body: body, object: "s3://\(bucket)/\(key)" + (events.count > 1 ? " (+\(events.count - 1))" : ""), code: nil))
            }
            return .leave("a bucket event that creates nothing")
        }
        return .leave("neither a SnapThumb letter nor a bucket event")
    }

    static func plan(pubSub message: PubSubMessage) -> Plan {
        // Forwarded by Pub/Sub's own dead-lettering: the original notification, republished as it is.
        if message.attributes["eventType"] != nil, message.attributes["snapthumb.code"] == nil {
            let object = "s3://\(message.attributes["bucketId"] ?? "?")/\(message.attributes["objectId"] ?? "?")"
            return .send(Event(body: String(decoding: message.data, as: UTF8.self), attributes: message.attributes, object: object, code: nil))
        }
        var json = ((try? JSONSerialization.jsonObject(with: message.data)) as? [String: Any]) ?? [:]
        for (attribute, field) in [("snapthumb.object", "object"), ("snapthumb.code", "code")] where json[field] == nil {
            json[field] = message.attributes[attribute]
        }
        guard json["code"] is String else { return .leave("neither a SnapThumb letter nor a Cloud Storage notification") }
        guard let (bucket, key, code) = letterObject(json) else {
            return .leave("a letter that names no upload (code \(json["code"] as? String ?? "?")): the message it came from was no bucket event")
        }
        // No generation: the consumer reads the object as it is now (the fixed one).
        let attributes = ["eventType": StorageNotification.finalize, "bucketId": bucket, "objectId": key, "payloadFormat": "NONE"]
        return .send(Event(body: "", attributes: attributes, object: "s3://\(bucket)/\(key)", code: code))
    }

    /// An S3 `ObjectCreated:Put` notification for one object, its key URL-encoded as S3 writes
    /// it (`+` for a space; `S3EventDecoder.decodeKey` reads it back).
    static func s3Event(bucket: String, key: String) -> String {
        let record: [String: Any] = [
            "eventVersion": "2.1", "eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
            "s3": ["s3SchemaVersion": "1.0", "bucket": ["name": bucket, "arn": "arn:aws:s3:::\(bucket)"], "object": ["key": encodeKey(key)]],
        ]
        let data = (try? JSONSerialization.data(withJSONObject: ["Records": [record]], options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    static func encodeKey(_ key: String) -> String {
        var out = ""
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "): out += "+"
            default: out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}
