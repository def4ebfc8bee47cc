import Foundation
import Logging
import Prometheus
import Synchronization
import Testing
import SnapThumbTesting
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SnapThumbGoogle
// @testable: `QueueSource` and `ConsumeMetrics` are internal, see QueueSourceTests.swift.
@testable import SnapThumbQueue

/// A recording queue whose lease changes can fail.
final class FlakyLeaseQueue: MessageQueue, @unchecked Sendable {
    let inner = RecordingQueue()
    var failLeases = false
    var leaseSeconds: Double { inner.leaseSeconds }
    var location: String { inner.location }
    func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage] { [] }
    func setLease(_ message: QueueMessage, seconds: Double) throws {
        if failLeases { throw SnapError(.store, "the queue is unreachable") }
        try inner.setLease(message, seconds: seconds)
    }
    func acknowledge(_ message: QueueMessage) throws { try inner.acknowledge(message) }
}

@Suite("consume: hostile messages and failures")
struct QueueHostileTests {
    static func source(_ queue: any MessageQueue, deadLetters: (any DeadLetterSink)?, log: CapturedLog = CapturedLog(),
                       registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
                       decode: @escaping @Sendable (QueueMessage) -> [BucketEvent]? = { S3EventDecoder.decode($0.body) }) -> QueueSource {
        QueueSource(queue: queue, deadLetters: deadLetters, scope: SourceScope(bucket: "uploads", prefix: "in/"), decode: decode,
                    metrics: ConsumeMetrics(registry: registry), logger: log.logger, worker: "test-worker", capacity: 6)
    }

    static func letters(_ queue: RecordingQueue) -> [DeadLetter] {
        queue.calls.compactMap { if case .letter(let letter) = $0 { return letter }; return nil }
    }

    static func leases(_ queue: RecordingQueue, _ id: String) -> [Double] {
        queue.calls.compactMap { if case .lease(id, let seconds) = $0 { return seconds }; return nil }
    }

    static func metrics(_ registry: PrometheusCollectorRegistry) -> String {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    @Test("an object's own failure (io) delays only its message, by its delivery count; receiving is not paused and the next message is worked on")
    func noHeadOfLineBlocking() {
        let queue = RecordingQueue()
        let source = Self.source(queue, deadLetters: queue)
        source.admit(QueueSourceTests.message("m1", QueueSourceTests.event(["in/gone.jpg"]), deliveries: 3))
        source.admit(QueueSourceTests.message("m2", QueueSourceTests.event(["in/good.jpg"])))
        let jobs = QueueSourceTests.take(source)
        #expect(jobs.count == 2)
        source.conclude(QueueSourceTests.result(jobs[0], .failed(SnapError(.io, "s3://uploads/in/gone.jpg: no longer in the bucket"))))
        source.waitForSettling()
        #expect(!source.isPaused, "a per-object failure must not pause receiving")
        #expect(Self.leases(queue, "m1") == [4], "third delivery: 4 s, its own backoff")
        source.conclude(QueueSourceTests.result(jobs[1], .processed([:])))
        source.finish()
        #expect(queue.calls.contains(.ack("m2")))
        #expect(!queue.calls.contains(.ack("m1")))
        #expect(Self.letters(queue).isEmpty)
        #expect(QueueSource.retryDelay(deliveries: nil) == 1 && QueueSource.retryDelay(deliveries: 2) == 2 && QueueSource.retryDelay(deliveries: 50) == 60)
    }

    @Test("transient failures of three messages in a row (the store down) pause receiving; fewer, or a success between them, do not")
    func storeDownPauses() {
        let queue = RecordingQueue()
        let source = Self.source(queue, deadLetters: queue)
        for id in ["m1", "m2", "m3", "m4", "m5"] { source.admit(QueueSourceTests.message(id, QueueSourceTests.event(["in/\(id).jpg"]))) }
        let jobs = QueueSourceTests.take(source)
        let down = SnapError(.store, "the store is unreachable")
        source.conclude(QueueSourceTests.result(jobs[0], .failed(down)))
        source.conclude(QueueSourceTests.result(jobs[1], .failed(SnapError(.io, "the store is full"))))
        source.waitForSettling()
        #expect(!source.isPaused)
        source.conclude(QueueSourceTests.result(jobs[2], .processed([:])))
        source.conclude(QueueSourceTests.result(jobs[3], .failed(down)))
        source.waitForSettling()
        #expect(!source.isPaused, "a success in between starts the count again")
        source.admit(QueueSourceTests.message("m6", QueueSourceTests.event(["in/m6.jpg"])))
        let more = QueueSourceTests.take(source)
        source.conclude(QueueSourceTests.result(jobs[4], .failed(down)))
        source.waitForSettling()
        #expect(!source.isPaused)
        source.conclude(QueueSourceTests.result(more[0], .failed(down)))
        source.waitForSettling()
        #expect(source.isPaused, "three in a row")
        source.finish()
    }

    @Test("a message with 2,000 records of one key is refused whole with one letter; 100,000 empty records make one letter and one bounded log line; repeated records make one job")
    func amplification() throws {
        let queue = RecordingQueue()
        let log = CapturedLog()
        let registry = PrometheusCollectorRegistry()
        let source = Self.source(queue, deadLetters: queue, log: log, registry: registry)
        source.admit(QueueSourceTests.message("many", QueueSourceTests.event(Array(repeating: "in/a.jpg", count: 2000))))
        source.admit(QueueSourceTests.message("empty", "{\"Records\":[" + Array(repeating: "{}", count: 100_000).joined(separator: ",") + "]}"))
        source.admit(QueueSourceTests.message("dup", QueueSourceTests.event(Array(repeating: "in/b.jpg", count: 50))))
        let jobs = QueueSourceTests.take(source)
        #expect(jobs.map(\.relativePath) == ["b.jpg"], "one job for one object")
        source.conclude(QueueSourceTests.result(jobs[0], .processed([:])))
        source.finish()
        let letters = Self.letters(queue)
        #expect(letters.count == 2, "\(letters.map(\.message))")
        #expect(letters.allSatisfy { $0.code == "unsupported" && $0.message.contains("records") })
        #expect(letters.allSatisfy { ($0.body?.utf8.count ?? 0) <= DeadLetter.maxBodyBytes })
        #expect(Set(queue.calls.compactMap { if case .ack(let id) = $0 { return id }; return nil }) == ["many", "empty", "dup"])
        #expect(log.lines.allSatisfy { $0.utf8.count < 8 * 1024 }, "\(log.lines.map(\.utf8.count).max() ?? 0) bytes")
        let text = Self.metrics(registry)
        #expect(text.contains("snapthumb_consume_uploads_refused_total{code=\"unsupported\"} 2"), "\(text)")
        // Up to the limit, records of other objects all make jobs.
        let more = RecordingQueue()
        let other = Self.source(more, deadLetters: more)
        other.admit(QueueSourceTests.message("hundred", QueueSourceTests.event((0..<QueueSource.maxRecords).map { "in/\($0).jpg" })))
        #expect(QueueSourceTests.take(other).count == QueueSource.maxRecords)
    }

    @Test("an ObjectCreated record whose key is not valid percent-encoding gets a letter with the reason and the event's bucket, key, version and time; the other records still run")
    func brokenKey() {
        let queue = RecordingQueue()
        let source = Self.source(queue, deadLetters: queue)
        let body = """
        {"Records":[{"eventName":"ObjectCreated:Put","eventTime":"2026-11-25T16:00:00.000Z","s3":{"bucket":{"name":"uploads"},"object":{"key":"in/bad%ZZname%.jpg","size":5,"versionId":"v7"}}},
                    {"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"uploads"}}},
                    {"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"uploads"},"object":{"key":"in/fine.jpg","size":5}}}]}
        """
        source.admit(QueueSourceTests.message("m1", body))
        let jobs = QueueSourceTests.take(source)
        #expect(jobs.map(\.relativePath) == ["fine.jpg"])
        #expect(queue.calls.isEmpty, "the letters go with the message's end")
        source.conclude(QueueSourceTests.result(jobs[0], .processed([:])))
        source.finish()
        let letters = Self.letters(queue)
        #expect(letters.count == 2)
        let broken = letters.first { $0.object == "s3://uploads/in/bad%ZZname%.jpg" }
        #expect(broken?.message.contains("not URL-encoded") == true, "\(letters)")
        #expect(broken?.bucket == "uploads" && broken?.version == "v7" && broken?.eventTime == "2026-11-25T16:00:00.000Z" && broken?.event == "ObjectCreated:Put")
        #expect(letters.contains { $0.message.contains("without s3.bucket.name and s3.object.key") })
        #expect(queue.calls.last == .ack("m1"))
    }

    @Test("a refusal in a message retried after a transient failure is dead-lettered once, when the message ends for good; a letter already sent is not sent again after the dead-letter queue failed")
    func lettersOnce() {
        let queue = RecordingQueue()
        let registry = PrometheusCollectorRegistry()
        let source = Self.source(queue, deadLetters: queue, registry: registry)
        source.admit(QueueSourceTests.message("m1", QueueSourceTests.event(["in/bad.jpg", "in/slow.jpg"])))
        var jobs = QueueSourceTests.take(source)
        source.conclude(QueueSourceTests.result(jobs[0], .failed(SnapError(.corrupt, "damaged"))))
        source.conclude(QueueSourceTests.result(jobs[1], .failed(SnapError(.io, "unreachable"))))
        source.waitForSettling()
        #expect(Self.letters(queue).isEmpty, "no letter while the message is retried")
        // The retry: the same refusal again, the other upload published.
        source.admit(QueueSourceTests.message("m1", QueueSourceTests.event(["in/bad.jpg", "in/slow.jpg"]), deliveries: 2))
        jobs = QueueSourceTests.take(source)
        source.conclude(QueueSourceTests.result(jobs[0], .failed(SnapError(.corrupt, "damaged"))))
        source.conclude(QueueSourceTests.result(jobs[1], .processed([:])))
        source.finish()
        #expect(Self.letters(queue).map(\.key) == ["bad.jpg"])
        #expect(queue.calls.last == .ack("m1"))
        let text = Self.metrics(registry)
        #expect(text.contains("snapthumb_consume_uploads_refused_total{code=\"corrupt\"} 1"), "counted once: \(text)")

        // Two letters, the second refused by the dead-letter queue: the message stays; on its
        // retry only the second is sent.
        let flaky = FailingSecondLetter()
        let other = Self.source(flaky.queue, deadLetters: flaky)
        other.admit(QueueSourceTests.message("m2", QueueSourceTests.event(["in/x.jpg", "in/y.jpg"])))
        jobs = QueueSourceTests.take(other)
        for job in jobs { other.conclude(QueueSourceTests.result(job, .failed(SnapError(.corrupt, "damaged")))) }
        other.waitForSettling()
        #expect(flaky.sent.withLock { $0 } == ["x.jpg"])
        #expect(!flaky.queue.calls.contains(.ack("m2")))
        other.admit(QueueSourceTests.message("m2", QueueSourceTests.event(["in/x.jpg", "in/y.jpg"]), deliveries: 2))
        jobs = QueueSourceTests.take(other)
        for job in jobs { other.conclude(QueueSourceTests.result(job, .failed(SnapError(.corrupt, "damaged")))) }
        other.finish()
        #expect(flaky.sent.withLock { $0 } == ["x.jpg", "y.jpg"])
        #expect(flaky.queue.calls.contains(.ack("m2")))
    }

    @Test("two deliveries of one upload published from the same bytes count once: the second is a repeat")
    func duplicatesCountedOnce() {
        let queue = RecordingQueue()
        let registry = PrometheusCollectorRegistry()
        let source = Self.source(queue, deadLetters: queue, registry: registry)
        source.admit(QueueSourceTests.message("m1", QueueSourceTests.event(["in/a.jpg"])))
        source.admit(QueueSourceTests.message("m2", QueueSourceTests.event(["in/a.jpg"])))
        let jobs = QueueSourceTests.take(source)
        #expect(jobs.count == 2)
        for job in jobs {
            source.conclude(JobResult(entry: job.entry, outcome: .processed([:]), milliseconds: 1, id: job.id, sourceDigest: "sha256:abc"))
        }
        source.finish()
        let text = Self.metrics(registry)
        #expect(text.contains("snapthumb_consume_uploads_published_total 1"), "\(text)")
        #expect(text.contains("snapthumb_consume_uploads_repeated_total 1"), "\(text)")
    }

    @Test("a retry delay the queue refuses is logged, not swallowed")
    func failedLeaseLogged() {
        let queue = FlakyLeaseQueue()
        queue.failLeases = true
        let log = CapturedLog()
        let source = Self.source(queue, deadLetters: queue.inner, log: log)
        source.admit(QueueSourceTests.message("m1", QueueSourceTests.event(["in/a.jpg"])))
        let jobs = QueueSourceTests.take(source)
        source.conclude(QueueSourceTests.result(jobs[0], .failed(SnapError(.io, "unreachable"))))
        source.finish()
        #expect(log.lines.contains { $0.contains("cannot set a message's retry delay") && $0.contains("the queue is unreachable") }, "\(log.lines)")
    }

    @Test("SQS letters: control characters in attributes escaped, the whole message within 256 KiB counted in bytes")
    func sqsLetters() throws {
        let key = "a\u{0}b\u{1B}c\u{7}d é.jpg"
        let big = String(repeating: "é", count: 300_000)  // 600,000 bytes, 300,000 characters
        let letter = DeadLetter(key: key, code: "unsupported", message: "m", object: nil, messageID: "id", worker: "w", body: big)
        let (body, attributes) = try SQSDeadLetters.message(letter)
        #expect(attributes["key"] == "a\\u{0}b\\u{1b}c\\u{7}d é.jpg")
        #expect(attributes.values.allSatisfy { $0.unicodeScalars.allSatisfy { $0.value >= 0x20 || $0 == "\t" || $0 == "\n" || $0 == "\r" } })
        #expect(body.utf8.count + attributes.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 6 } <= SQSDeadLetters.maxMessageBytes)
        let decoded = try JSONDecoder().decode(DeadLetter.self, from: Data(body.utf8))
        #expect(decoded.key == key, "the body keeps the key exactly (JSON escapes it)")
        #expect(decoded.body?.hasPrefix("ééé") == true && decoded.body?.hasSuffix("…") == true)
        // Noncharacters SQS refuses in a body are JSON escapes there; the key decodes the same.
        let odd = DeadLetter(key: "x\u{FFFF}y\u{FFFE}.jpg", code: "unsafe-name", message: "m \u{FFFF}", object: nil, messageID: "id", worker: "w")
        let (oddBody, oddAttributes) = try SQSDeadLetters.message(odd)
        #expect(oddBody.unicodeScalars.allSatisfy(SQSDeadLetters.isAllowed), "\(oddBody)")
        #expect(oddBody.contains("\\uFFFF"))
        #expect(try JSONDecoder().decode(DeadLetter.self, from: Data(oddBody.utf8)) == odd)
        #expect(oddAttributes["key"] == "x\\u{ffff}y\\u{fffe}.jpg")
    }

    @Test("Pub/Sub letters keep the notification's attributes and carry the specific reason of a notification that contradicts itself")
    func pubSubLetters() throws {
        let queue = RecordingQueue()
        let source = Self.source(queue, deadLetters: queue, decode: StorageEventDecoder.decode)
        let attributes = ["eventType": "OBJECT_FINALIZE", "bucketId": "uploads", "objectId": "in/x.jpg", "objectGeneration": "12",
                          "payloadFormat": "JSON_API_V1", "eventTime": "2026-11-25T16:00:00.000000Z"]
        source.admit(QueueMessage(id: "p1", receipt: "r", body: "{\"name\":\"in/other.jpg\",\"bucket\":\"uploads\"}", attributes: attributes))
        source.finish()
        let letters = Self.letters(queue)
        #expect(letters.count == 1)
        let letter = try #require(letters.first)
        #expect(letter.message.contains("objectId and the body's name differ"), "\(letter.message)")
        #expect(letter.attributes == attributes)
        #expect(letter.version == "12" && letter.eventTime == "2026-11-25T16:00:00.000000Z" && letter.bucket == "uploads")
        let outgoing = try PubSubDeadLetters.message(letter)
        #expect(outgoing.attributes["objectId"] == "in/x.jpg" && outgoing.attributes["eventTime"] == attributes["eventTime"])
        #expect(outgoing.attributes["snapthumb.code"] == "unsupported")
        #expect(outgoing.attributes["snapthumb.message"]?.contains("differ") == true)
        // A notification with 100 attributes still makes a letter Pub/Sub takes (100 at most).
        var crowded = letter
        crowded.attributes = Dictionary(uniqueKeysWithValues: (0..<100).map { ("a\($0)", "v") })
        #expect(try PubSubDeadLetters.message(crowded).attributes.count <= 100)
        #expect(queue.calls.last == .ack("p1"))
    }
}

/// A dead-letter sink that refuses its second letter once.
final class FailingSecondLetter: DeadLetterSink, @unchecked Sendable {
    let queue = RecordingQueue()
    let sent = Mutex<[String]>([])
    private let refused = Mutex(false)
    var location: String { "memory://letters" }
    func send(_ letter: DeadLetter) throws {
        let refuse = refused.withLock { refused -> Bool in
            guard !refused, sent.withLock({ $0.count }) == 1 else { return false }
            refused = true
            return true
        }
        if refuse { throw SnapError(.store, "the dead-letter queue is unreachable") }
        sent.withLock { $0.append(letter.key ?? "") }
    }
}
