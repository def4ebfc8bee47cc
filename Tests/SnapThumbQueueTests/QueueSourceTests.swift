import Foundation
import Logging
import Prometheus
import Synchronization
import Testing
import SnapThumbCore
import SnapThumbStore
// @testable: one test checks that a job's expectation reaches the runner's job line, whose
// encoding (`WorkerProtocol`, `WorkerLine`) is the runner's own wire format, rightly not public.
@testable import SnapThumbRunner
import SnapThumbConfig
import SystemKit
// @testable: `QueueSource` (what the consumer does with each message and each job's end) and
// `ConsumeMetrics` are the consumer's inner parts; the module's public API is `ConsumeService`,
// which runs them with worker processes and a real queue (SnapThumbCLITests). Making them public
// would let a caller drive messages past the service's ordering of receive, lease and drain.
@testable import SnapThumbQueue

/// A queue and dead-letter sink that record what the consumer did to each message, in order.
final class RecordingQueue: MessageQueue, DeadLetterSink, @unchecked Sendable {
    enum Call: Equatable {
        case lease(String, Double)
        case ack(String)
        case letter(DeadLetter)
    }
    private let lock = NSLock()
    private var recorded: [Call] = []
    let leaseSeconds: Double
    var failLetters = false

    init(lease: Double = 30) { leaseSeconds = lease }

    var location: String { "memory://test" }
    var calls: [Call] { lock.lock(); defer { lock.unlock() }; return recorded }
    private func record(_ call: Call) { lock.lock(); recorded.append(call); lock.unlock() }

    func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage] { [] }
    func setLease(_ message: QueueMessage, seconds: Double) throws { record(.lease(message.id, seconds)) }
    func acknowledge(_ message: QueueMessage) throws { record(.ack(message.id)) }
    func send(_ letter: DeadLetter) throws {
        if failLetters { throw SnapError(.store, "the dead-letter queue is unreachable") }
        record(.letter(letter))
    }
}

@Suite("consume: the queue job source")
struct QueueSourceTests {
    static func source(_ queue: RecordingQueue, deadLetters: Bool = true) -> QueueSource {
        QueueSource(queue: queue, deadLetters: deadLetters ? queue : nil, scope: SourceScope(bucket: "uploads", prefix: "in/"),
                    decode: { S3EventDecoder.decode($0.body) }, metrics: ConsumeMetrics(registry: PrometheusCollectorRegistry()),
                    logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, worker: "test-worker", capacity: 6)
    }

    static func event(_ keys: [String], bucket: String = "uploads") -> String {
        let records = keys.map { "{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"\(bucket)\"},\"object\":{\"key\":\"\($0)\",\"size\":5}}}" }
        return "{\"Records\":[\(records.joined(separator: ","))]}"
    }

    static func message(_ id: String, _ body: String, deliveries: Int = 1) -> QueueMessage {
        QueueMessage(id: id, receipt: "r-\(id)-\(deliveries)", body: body, deliveries: deliveries, sentAt: Date().timeIntervalSince1970)
    }

    /// Ids as the runner hands them out: never the same twice.
    static let ids = Atomic(0)
    static func nextID() -> JobID { JobID(ids.add(1, ordering: .relaxed).newValue) }

    /// Every job the source has ready, as the runner would take them (each under a new id).
    static func take(_ source: QueueSource) -> [Dealt] {
        var dealt: [Dealt] = []
        while true {
            let id = nextID()
            guard case .job(let entry) = source.next(waitingUpTo: 0, id: id) else { return dealt }
            dealt.append(Dealt(id: id, entry: entry))
        }
    }

    /// The runner's report of a job's end, under the id it was taken with.
    static func result(_ job: Dealt, _ outcome: JobOutcome) -> JobResult {
        JobResult(entry: job.entry, outcome: outcome, milliseconds: 1, id: job.id)
    }

    @Test("a published upload is deleted; its key is relative to --source and URL-decoded, the path names the object")
    func published() {
        let queue = RecordingQueue()
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/a+b%2Bc.jpg"])))
        let jobs = Self.take(source)
        #expect(jobs.map(\.relativePath) == ["a b+c.jpg"])
        #expect(jobs.map(\.path) == ["s3://uploads/in/a b+c.jpg"])
        #expect(queue.calls.isEmpty)
        source.conclude(Self.result(jobs[0], .processed([:])))
        source.finish()
        #expect(queue.calls == [.ack("m1")])
    }

    @Test("a refused upload goes to the dead-letter queue with key, code and message, then its message is deleted")
    func refused() throws {
        let queue = RecordingQueue()
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/ok.jpg", "in/bad.jpg"])))
        let jobs = Self.take(source)
        #expect(jobs.count == 2)
        source.conclude(Self.result(jobs[1], .failed(SnapError(.corrupt, "damaged"))))
        #expect(queue.calls.isEmpty, "nothing happens to a message before all its uploads ended")
        source.conclude(Self.result(jobs[0], .skipped))
        source.finish()
        let letter = DeadLetter(key: "bad.jpg", code: "corrupt", message: "damaged", object: "s3://uploads/in/bad.jpg", messageID: "m1", worker: "test-worker",
                                bucket: "uploads", event: "ObjectCreated:Put")
        #expect(queue.calls == [.letter(letter), .ack("m1")])
    }

    @Test("a crash (poison) and a timeout are refusals too; without a dead-letter queue they are logged and deleted")
    func refusedWithoutDeadLetters() {
        let queue = RecordingQueue()
        let source = Self.source(queue, deadLetters: false)
        source.admit(Self.message("m1", Self.event(["in/p.jpg"])))
        source.admit(Self.message("m2", Self.event(["in/t.jpg"])))
        let jobs = Self.take(source)
        source.conclude(Self.result(jobs[0], .crashed(SnapError(.poison, "crashed"))))
        source.conclude(Self.result(jobs[1], .timedOut(SnapError(.timeout, "slow"))))
        source.finish()
        #expect(Set(queue.calls.map { "\($0)" }) == Set([RecordingQueue.Call.ack("m1"), .ack("m2")].map { "\($0)" }))
    }

    /// What Cloud Storage publishes through Pub/Sub (JSON_API_V1) when `name` is written with `bytes`.
    static func storageMessage(_ id: String, name: String, bytes: [UInt8], generation: Int64, md5: [UInt8]? = nil) -> QueueMessage {
        let body = "{\"kind\":\"storage#object\",\"name\":\"\(name)\",\"bucket\":\"uploads\",\"generation\":\"\(generation)\",\"size\":\"\(bytes.count)\",\"md5Hash\":\"\(Data(md5 ?? MD5.digest(bytes)).base64EncodedString())\"}"
        return QueueMessage(id: id, receipt: "r-\(id)", body: body, attributes: [
            "eventType": "OBJECT_FINALIZE", "bucketId": "uploads", "objectId": name, "objectGeneration": "\(generation)", "payloadFormat": "JSON_API_V1"])
    }

    @Test("a Cloud Storage notification's generation, size and MD5 reach the job; a superseded generation is acknowledged, never dead-lettered; bytes that are not the ones announced are refused")
    func storageNotifications() throws {
        let queue = RecordingQueue()
        let source = QueueSource(queue: queue, deadLetters: queue, scope: SourceScope(bucket: "uploads", prefix: "in/"), decode: StorageEventDecoder.decode,
                                 metrics: ConsumeMetrics(registry: PrometheusCollectorRegistry()), logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() },
                                 worker: "test-worker", capacity: 6)
        let bytes = Array("not really a jpeg".utf8)
        source.admit(Self.storageMessage("m1", name: "in/red flower.jpg", bytes: bytes, generation: 1_732_540_000_000_001))
        source.admit(Self.storageMessage("m2", name: "in/b.jpg", bytes: bytes, generation: 1_732_540_000_000_002))
        let jobs = Self.take(source)
        #expect(jobs.map(\.relativePath) == ["red flower.jpg", "b.jpg"])
        #expect(jobs.map(\.path) == ["s3://uploads/in/red flower.jpg", "s3://uploads/in/b.jpg"])
        #expect(jobs[0].expected == SourceExpectation(generation: 1_732_540_000_000_001, size: Int64(bytes.count), md5: MD5.digest(bytes)))
        #expect(jobs[1].expected?.generation == 1_732_540_000_000_002)
        // The runner hands the entry (with its expectation) to a worker: the job line carries it.
        var line = WorkerProtocol.Job(i: 0, path: jobs[0].path, key: jobs[0].relativePath, size: jobs[0].size)
        line.expect(jobs[0].expected)
        #expect(WorkerLine.job(Data(WorkerLine.encode(line)))?.expected == jobs[0].expected)

        source.conclude(Self.result(jobs[0], .failed(SnapError(.superseded, "s3://uploads/in/red flower.jpg generation 1732540000000001 was replaced by generation 1732540000000009 before it was read"))))
        source.conclude(Self.result(jobs[1], .failed(SnapError(.unreadable, "read 3 bytes, the notification says 17"))))
        source.finish()
        let calls = queue.calls
        #expect(calls.contains(.ack("m1")))
        #expect(calls.contains(.ack("m2")))
        let letters = calls.compactMap { if case .letter(let letter) = $0 { return letter } else { return nil } }
        #expect(letters.map(\.key) == ["b.jpg"], "a superseded generation is not dead-lettered")
        #expect(letters.map(\.code) == ["unreadable"])
    }

    @Test("a transient failure is never dead-lettered: the message stays, hidden for a backoff")
    func transient() {
        let queue = RecordingQueue()
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/a.jpg"])))
        let jobs = Self.take(source)
        source.conclude(Self.result(jobs[0], .failed(SnapError(.store, "bucket unreachable"))))
        source.finish()
        #expect(queue.calls.count == 1)
        guard case .lease("m1", let seconds) = queue.calls.first else { Issue.record("\(queue.calls)"); return }
        #expect(seconds >= 1)
    }

    @Test("when the dead-letter queue cannot take a refusal, the message is not deleted")
    func deadLetterDown() {
        let queue = RecordingQueue()
        queue.failLetters = true
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/bad.jpg"])))
        let jobs = Self.take(source)
        source.conclude(Self.result(jobs[0], .failed(SnapError(.corrupt, "damaged"))))
        source.finish()
        #expect(!queue.calls.contains(.ack("m1")))
        #expect(queue.calls.contains { if case .lease("m1", let s) = $0 { return s >= 1 }; return false })
    }

    @Test("test events, other events and objects outside --source are deleted without work; a body that is no event is dead-lettered")
    func ignored() {
        let queue = RecordingQueue()
        let source = Self.source(queue)
        source.admit(Self.message("t", "{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\",\"Bucket\":\"uploads\"}"))
        source.admit(Self.message("o", Self.event(["out/a.jpg"])))
        source.admit(Self.message("b", Self.event(["in/a.jpg"], bucket: "elsewhere")))
        source.admit(Self.message("d", "{\"Records\":[{\"eventName\":\"ObjectRemoved:Delete\",\"s3\":{\"bucket\":{\"name\":\"uploads\"},\"object\":{\"key\":\"in/a.jpg\"}}}]}"))
        source.admit(Self.message("m", Self.event(["in/dir/"])))
        source.admit(Self.message("g", "hello"))
        #expect(Self.take(source).isEmpty)
        source.finish()
        let acks = queue.calls.compactMap { if case .ack(let id) = $0 { return id }; return nil }
        #expect(Set(acks) == ["t", "o", "b", "d", "m", "g"])
        let letters = queue.calls.compactMap { if case .letter(let l) = $0 { return l }; return nil }
        #expect(letters.count == 1 && letters[0].code == "unsupported" && letters[0].body == "hello" && letters[0].key == nil)
    }

    @Test("a lease is extended once half of it has passed, not before")
    func leaseExtension() {
        let queue = RecordingQueue(lease: 4)
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/a.jpg"])))
        _ = Self.take(source)
        source.extendLeases()
        #expect(queue.calls.isEmpty)
        Thread.sleep(forTimeInterval: 2.1)
        source.extendLeases()
        #expect(queue.calls == [.lease("m1", 4)])
        source.extendLeases()
        #expect(queue.calls.count == 1, "extended to a full lease again")
    }

    @Test("a message delivered again while held makes no second job; shutdown releases messages not yet started and those abandoned")
    func redeliveryAndShutdown() {
        let queue = RecordingQueue()
        let source = Self.source(queue)
        source.admit(Self.message("m1", Self.event(["in/a.jpg"])))
        source.admit(Self.message("m2", Self.event(["in/b.jpg"])))
        let id = Self.nextID()
        let first = source.next(waitingUpTo: 0, id: id)
        source.admit(Self.message("m1", Self.event(["in/a.jpg"]), deliveries: 2))
        guard case .job(let a) = first else { Issue.record("no job"); return }
        source.stop()
        #expect(source.next(waitingUpTo: 0.1, id: Self.nextID()).isEnded)
        source.conclude(Self.result(Dealt(id: id, entry: a), .abandoned))
        source.finish()
        #expect(Set(queue.calls.map { "\($0)" }) == Set([RecordingQueue.Call.lease("m1", 0), .lease("m2", 0)].map { "\($0)" }))
    }
}

/// A job the source gave the runner, with the id it was given under.
@dynamicMemberLookup
struct Dealt {
    let id: JobID
    let entry: FileWalker.Entry
    subscript<T>(dynamicMember path: KeyPath<FileWalker.Entry, T>) -> T { entry[keyPath: path] }
}

extension JobSourceItem {
    var isEnded: Bool { if case .ended = self { return true }; return false }
}

@Suite("consume: bucket events")
struct BucketEventTests {
    @Test("S3 notifications: + is a space, %2B a plus; several records; other event names")
    func s3Records() {
        let body = """
        {"Records":[{"eventName":"ObjectCreated:Put","eventTime":"2026-11-25T16:00:00.000Z","s3":{"bucket":{"name":"b"},"object":{"key":"in/red+flower%2B1.jpg","size":12,"versionId":"v1","sequencer":"0055AED6DCD90281E5"}}},
                    {"eventName":"ObjectCreated:CompleteMultipartUpload","s3":{"bucket":{"name":"b"},"object":{"key":"in/caf%C3%A9.jpg","size":"7"}}},
                    {"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"in/x.jpg"}}}]}
        """
        #expect(S3EventDecoder.decode(body) == [
            .objectCreated(bucket: "b", key: "in/red flower+1.jpg", size: 12,
                           origin: EventOrigin(name: "ObjectCreated:Put", time: "2026-11-25T16:00:00.000Z", version: "v1", sequencer: "0055AED6DCD90281E5")),
            .objectCreated(bucket: "b", key: "in/café.jpg", size: 7, origin: EventOrigin(name: "ObjectCreated:CompleteMultipartUpload")),
            .other("ObjectRemoved:Delete"),
        ])
    }

    @Test("an SNS envelope, an EventBridge event (its key is not URL-encoded), a test event, and what is none of them")
    func otherForms() throws {
        let inner = "{\"Records\":[{\"eventName\":\"ObjectCreated:Copy\",\"s3\":{\"bucket\":{\"name\":\"b\"},\"object\":{\"key\":\"a+b.jpg\"}}}]}"
        let sns = String(decoding: try JSONSerialization.data(withJSONObject: ["Type": "Notification", "TopicArn": "arn:aws:sns:x", "Message": inner]), as: UTF8.self)
        #expect(S3EventDecoder.decode(sns) == [.objectCreated(bucket: "b", key: "a b.jpg", size: nil, origin: EventOrigin(name: "ObjectCreated:Copy"))])
        let bridge = "{\"version\":\"0\",\"source\":\"aws.s3\",\"detail-type\":\"Object Created\",\"detail\":{\"bucket\":{\"name\":\"b\"},\"object\":{\"key\":\"a+b c.jpg\",\"size\":5}}}"
        #expect(S3EventDecoder.decode(bridge) == [.objectCreated(bucket: "b", key: "a+b c.jpg", size: 5, origin: EventOrigin(name: "Object Created"))])
        let deleted = "{\"source\":\"aws.s3\",\"detail-type\":\"Object Deleted\",\"detail\":{\"bucket\":{\"name\":\"b\"},\"object\":{\"key\":\"a\"}}}"
        #expect(S3EventDecoder.decode(deleted) == [.other("EventBridge Object Deleted")])
        #expect(S3EventDecoder.decode("{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\",\"Bucket\":\"b\"}") == [.test(bucket: "b")])
        #expect(S3EventDecoder.decode("not json") == nil)
        #expect(S3EventDecoder.decode("{\"hello\":1}") == nil)
        #expect(S3EventDecoder.decode("[1,2]") == nil)
    }

    @Test("--source placement: the prefix, other buckets, directory markers and dot-names as backfill skips them")
    func placement() {
        let scope = SourceScope(bucket: "b", prefix: "in/")
        #expect(scope.place(bucket: "b", objectKey: "in/a/b.jpg") == .upload(key: "a/b.jpg"))
        #expect(scope.place(bucket: "c", objectKey: "in/a.jpg") == .outside)
        #expect(scope.place(bucket: "b", objectKey: "inside/a.jpg") == .outside)
        #expect(scope.place(bucket: "b", objectKey: "in/") == .ignored)
        #expect(scope.place(bucket: "b", objectKey: "in/d/") == .ignored)
        #expect(scope.place(bucket: "b", objectKey: "in/.x/a.jpg") == .ignored)
        #expect(SourceScope(bucket: "b", prefix: "").place(bucket: "b", objectKey: "x.jpg") == .upload(key: "x.jpg"))
    }

    @Test("SQS configuration: the region of an AWS queue URL, endpoints from AWS_ENDPOINT_URL_SQS then AWS_ENDPOINT_URL")
    func configuration() throws {
        let keys = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret"]
        let aws = try SQSConfiguration(queueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/uploads", cloud: CloudSettings.resolve(environment: keys.merging(["AWS_REGION": "us-east-1"]) { $1 }))
        #expect(aws.region == "eu-west-1" && aws.endpoint.absoluteString == "https://sqs.eu-west-1.amazonaws.com" && aws.name == "uploads")
        let local = try SQSConfiguration(queueURL: "http://127.0.0.1:4566/000000000000/q", cloud: CloudSettings.resolve(environment: keys))
        #expect(local.endpoint.absoluteString == "http://127.0.0.1:4566" && local.region == "us-east-1")
        let both = keys.merging(["AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_SQS": "http://b:2"]) { $1 }
        #expect(try SQSConfiguration(queueURL: "https://sqs.us-east-2.amazonaws.com/1/q", cloud: CloudSettings.resolve(environment: both)).endpoint.absoluteString == "http://b:2")
        #expect(throws: SnapError.self) { try SQSConfiguration(queueURL: "sqs://q", cloud: CloudSettings.resolve(environment: keys)) }
        #expect(throws: SnapError.self) { try SQSConfiguration(queueURL: "https://sqs.us-east-1.amazonaws.com/1/q", cloud: CloudSettings.resolve(environment: [:])) }
        #expect("\(aws.credentials)" == "S3Credentials(<redacted>)")
    }
}
