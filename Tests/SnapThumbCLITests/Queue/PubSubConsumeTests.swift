#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Synchronization
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import SnapThumbGoogle
import VipsKit

/// Google's Pub/Sub emulator on 127.0.0.1 (Scripts/pubsub-emulator.sh run), one per test
/// process, stopped when this process's end closes the script's standard input.
final class PubSubEmulatorProcess: Sendable {
    let server: ServerProcess
    let host: String

    static let installed: Bool = {
        if ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_PUBSUB_EMULATOR"] == "1" { return true }
        guard let probe = try? SpawnedProcess("/bin/bash", ["\(Repo.root)/Scripts/pubsub-emulator.sh", "available"],
                                              stdout: .null, stderr: .null) else { return false }
        return probe.wait() == SpawnedProcess.Ending(code: 0, signaled: false)
    }()

    static let shared: Result<PubSubEmulatorProcess, SnapError> = Result { try PubSubEmulatorProcess() }.mapError { $0 as? SnapError ?? SnapError(.internal, "\($0)") }

    private init() throws {
        server = try ServerProcess("/bin/bash", ["\(Repo.root)/Scripts/pubsub-emulator.sh", "run"])
        let first = server.firstLine
        guard first.hasPrefix("host ") else { throw SnapError(.internal, "the Pub/Sub emulator did not start: \(first)") }
        host = String(first.dropFirst(5))
    }

    func client() throws -> PubSubClient {
        try PubSubClient.fromEnvironment(["PUBSUB_EMULATOR_HOST": host], retry: GoogleRetryPolicy(attempts: 3, base: 0.05, cap: 0.2))
    }
}

/// Runs an async call from a synchronous test without the concurrency pool. A synchronous
/// test holds one of the pool's threads while it waits, and the pool has one per core:
/// two such tests waiting on tasks that need the pool (2 cores) wait for ever. The call's
/// task therefore prefers its own executor, a serial queue on threads of its own.
func await_<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task(executorPreference: OwnThreadsExecutor.shared) {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

/// A task executor on a serial dispatch queue: dispatch gives such a queue threads
/// beyond the cooperative pool's width, so its jobs run while the pool is blocked.
final class OwnThreadsExecutor: TaskExecutor {
    static let shared = OwnThreadsExecutor()
    private let queue = DispatchQueue(label: "snapthumb.tests.await")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}

/// `consume gcppubsub://…` against the Pub/Sub emulator carrying Cloud Storage's
/// notifications, with moto's S3 standing in for the bucket (read through the S3 API,
/// as Cloud Storage's XML API is with an HMAC key).
@Suite("consume: Cloud Storage notifications through Pub/Sub", .serialized,
       .enabled(if: Repo.motoAvailable), .enabled(if: PubSubEmulatorProcess.installed, "the Pub/Sub emulator is not installed (google-cloud-cli-pubsub-emulator, with Java): skipped"))
struct PubSubConsumeTests {
    /// What Cloud Storage publishes when `name` is written with `bytes`.
    static func notification(bucket: String, name: String, bytes: [UInt8], eventType: String = "OBJECT_FINALIZE", generation: Int64) -> OutgoingMessage {
        let body: [String: Any] = ["kind": "storage#object", "name": name, "bucket": bucket, "generation": "\(generation)", "metageneration": "1",
                                   "size": "\(bytes.count)", "md5Hash": Data(MD5.digest(bytes)).base64EncodedString(), "contentType": "image/jpeg"]
        return OutgoingMessage(data: try! JSONSerialization.data(withJSONObject: body), attributes: [
            "eventType": eventType, "bucketId": bucket, "objectId": name, "objectGeneration": "\(generation)", "payloadFormat": "JSON_API_V1",
            "notificationConfig": "projects/_/buckets/\(bucket)/notificationConfigs/1", "eventTime": "2026-11-25T16:00:00.000000Z",
        ])
    }

    /// Waits until `done` holds, for as long as `progress` keeps changing: only a run that
    /// stops moving for `stall` seconds fails (a loaded machine is slow, never wrong).
    /// (A run that moves for half an hour without ending is stuck in a loop: that fails too.)
    static func untilDone(stall: Double = 300, progress: () throws -> Int, done: () throws -> Bool) rethrows -> Bool {
        var last = -1
        var movedAt = Date()
        let began = Date()
        while Date().timeIntervalSince(began) < 1800 {
            if try done() { return true }
            let now = try progress()
            if now != last { last = now; movedAt = Date() }
            if Date().timeIntervalSince(movedAt) > stall { return try done() }
            Thread.sleep(forTimeInterval: 0.5)
        }
        return try done()
    }

    /// A project on the emulator: the uploads topic and its subscription, the dead-letter
    /// topic and a subscription that watches it.
    struct Project {
        let topic: PubSubTopic, dlq: PubSubTopic
        let subscription: PubSubSubscription, watcher: PubSubSubscription

        init(_ pubsub: PubSubClient) throws {
            let project = "proj-" + UUID().uuidString.lowercased().prefix(10)
            topic = try PubSubTopic(project: project, id: "uploads")
            dlq = try PubSubTopic(project: project, id: "snap-dead-letters")
            subscription = try PubSubSubscription(project: project, id: "snapthumb")
            watcher = try PubSubSubscription(project: project, id: "dead-letter-watcher")
            let (topic, dlq, subscription, watcher) = (topic, dlq, subscription, watcher)
            try await_ {
                try await pubsub.createTopic(topic)
                try await pubsub.createTopic(dlq)
                try await pubsub.createSubscription(subscription, topic: topic, ackDeadlineSeconds: 10)
                try await pubsub.createSubscription(watcher, topic: dlq)
            }
        }
    }

    @Test("the issue's check: 30 snaps (names with spaces), 2 corrupt files, an object outside the prefix and an OBJECT_DELETE; two consumers, one killed -9 and restarted: exactly the 30 manifests, the 2 corrupt keys on the dead-letter topic and nothing else, SIGTERM exits 0, verify passes")
    func fleet() throws {
        let emulator = try PubSubEmulatorProcess.shared.get()
        let pubsub = try emulator.client()
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let project = try Project(pubsub)
        let (topic, watcher, subscription) = (project.topic, project.watcher, project.subscription)
        let source = "s3://\(uploads)/in/", store = "s3://\(thumbs)/v1"
        let env = moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 }
        // No per-image limit a loaded machine could hit: only corrupt files may be refused. A lease
        // that lapses anyway (a stalled machine) only redelivers: the store publishes once.
        func consume() throws -> Daemon {
            try Daemon(["consume", subscription.url, "--source", source, "--store", store, "--jobs", "2", "--log-format", "json",
                        "--dead-letter-topic", project.dlq.name, "--image-timeout", "30m", "--visibility-timeout", "20s"], environment: env)
        }
        var a = try consume()
        let b = try consume()
        defer { _ = a.terminate(within: 5); _ = b.terminate(within: 5) }

        let client = try moto.client(bucket: uploads)
        let keys = ConsumeTests.keys(30)
        #expect(keys.filter { $0.contains(" ") }.count >= 10)
        let badKeys = ["broken 1.jpg", "bad+2/truncated.jpg"]
        let badFiles = ["corrupt.jpg", "truncated.jpg"]
        var generation: Int64 = 1_732_540_000_000_000
        func upload(_ name: String, _ file: String, eventType: String = "OBJECT_FINALIZE") throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            _ = try client.put(name, body: bytes, contentType: "application/octet-stream")
            generation += 1
            let message = Self.notification(bucket: uploads, name: name, bytes: bytes, eventType: eventType, generation: generation)
            _ = try await_ { try await pubsub.publish(topic, [message]) }
        }
        func published() throws -> Int { try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/").count }
        for (i, key) in keys.enumerated() {
            try upload("in/" + key, Repo.sample("snaps/\(ConsumeTests.good[i % ConsumeTests.good.count])"))
            if i < badKeys.count { try upload("in/" + badKeys[i], Repo.sample("bad/\(badFiles[i])")) }
            if i == 9 {
                // Kill A once it is at work (however long that takes), then start it again.
                _ = Self.untilDone(progress: { a.log.count }, done: { a.log.contains("\"processed\"") })
                a.killHard()
                a = try consume()
            }
        }
        try upload("other/outside.jpg", Repo.sample("snaps/grey.jpg"))
        try upload("in/snap 0.jpg", Repo.sample("snaps/grey.jpg"), eventType: "OBJECT_DELETE")

        var letters: [ReceivedMessage] = []
        func collectLetters() throws {
            let batch = try await_ { try await pubsub.pull(watcher, maxMessages: 10, wait: 0) }
            if !batch.isEmpty { try await_ { try await pubsub.acknowledge(watcher, ackIDs: batch.map(\.ackID)) } }
            letters += batch
        }
        let done = try Self.untilDone(progress: { try published() + letters.count + a.log.count + b.log.count }) {
            try collectLetters()
            let count = try published()
            return Set(letters.compactMap { $0.message.attributes["snapthumb.key"] }).count >= badKeys.count && count >= keys.count
        }
        #expect(done, "A: \(a.log.suffix(3000))\nB: \(b.log.suffix(3000))")
        // Everything acknowledged: nothing comes back on the subscription, not even after a lease
        // (the killed worker's messages return then). What this pull takes is handed straight back.
        var emptySince: Date?
        let drained = try Self.untilDone(progress: { a.log.count + b.log.count }) {
            let left = try await_ { try await pubsub.pull(subscription, maxMessages: 10, wait: 0) }
            if !left.isEmpty {
                try await_ { try await pubsub.modifyAckDeadline(subscription, ackIDs: left.map(\.ackID), seconds: 0) }
                emptySince = nil
                return false
            }
            if emptySince == nil { emptySince = Date() }
            return Date().timeIntervalSince(emptySince!) > 25
        }
        #expect(drained)
        #expect(a.terminate() == 0, "\(a.log.suffix(2000))")
        #expect(b.terminate() == 0, "\(b.log.suffix(2000))")
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/")) == Set(keys))
        #expect(try published() == keys.count)

        // Only the refused uploads, with key and code as attributes (a worker killed between the
        // dead letter and the ack makes a second letter for the same key: at-least-once).
        try collectLetters()
        #expect(Set(letters.compactMap { $0.message.attributes["snapthumb.key"] }) == Set(badKeys), "\(letters)")
        #expect(letters.allSatisfy { $0.message.attributes["snapthumb.code"] == "corrupt" }, "\(letters)")
        #expect(letters.allSatisfy { $0.message.attributes["snapthumb.object"]?.hasPrefix("s3://\(uploads)/in/") == true })

        let log = a.log + b.log
        #expect(log.contains("other/outside.jpg is outside --source"))
        #expect(log.contains("OBJECT_DELETE for gs://\(uploads)/in/snap 0.jpg: only OBJECT_FINALIZE makes thumbnails"))
        let verify = try CloudCLI.run(["verify", store], environment: moto.environment())
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
    }

    @Test("the notified generation: bytes other than those announced are refused as unreadable onto the dead-letter topic; a generation deleted before it was read is superseded, acknowledged with one log line and not dead-lettered")
    func generations() throws {
        let emulator = try PubSubEmulatorProcess.shared.get()
        let pubsub = try emulator.client()
        let (moto, uploads) = try Moto.withBucket()
        let project = try Project(pubsub)
        let (topic, watcher, subscription) = (project.topic, project.watcher, project.subscription)
        let store = Repo.tempDirectory("snapthumb-pubsub-store")
        defer { Fixtures.remove(store) }
        let env = moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 }
        let worker = try Daemon(["consume", subscription.url, "--source", "s3://\(uploads)/in/", "--store", store, "--jobs", "1", "--log-format", "json",
                                 "--dead-letter-topic", project.dlq.name, "--image-timeout", "30m"], environment: env)
        defer { _ = worker.terminate(within: 5) }
        let client = try moto.client(bucket: uploads)
        let good = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/grey.jpg"))))
        let other = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/alpha.png"))))
        // Announced as `other`'s bytes, but the object holds `good`'s (moto ignores ?generation=).
        _ = try client.put("in/raced.jpg", body: good, contentType: "image/jpeg")
        // Written, then deleted before the worker read it.
        _ = try client.put("in/gone.jpg", body: good, contentType: "image/jpeg")
        try client.delete("in/gone.jpg")
        _ = try client.put("in/fine.jpg", body: good, contentType: "image/jpeg")
        try await_ {
            try await pubsub.publish(topic, [Self.notification(bucket: uploads, name: "in/raced.jpg", bytes: other, generation: 11),
                                             Self.notification(bucket: uploads, name: "in/gone.jpg", bytes: good, generation: 12),
                                             Self.notification(bucket: uploads, name: "in/fine.jpg", bytes: good, generation: 13)])
        }
        var letters: [ReceivedMessage] = []
        let done = try Self.untilDone(progress: { worker.log.count + letters.count }) {
            let batch = try await_ { try await pubsub.pull(watcher, maxMessages: 10, wait: 0) }
            if !batch.isEmpty { try await_ { try await pubsub.acknowledge(watcher, ackIDs: batch.map(\.ackID)) } }
            letters += batch
            return !letters.isEmpty && worker.log.contains("superseded") && FileManager.default.fileExists(atPath: store + "/manifests/fine.jpg.json")
        }
        #expect(done, "\(worker.log.suffix(3000))")
        #expect(worker.terminate() == 0)
        #expect(letters.compactMap { $0.message.attributes["snapthumb.key"] } == ["raced.jpg"])
        #expect(letters.first?.message.attributes["snapthumb.code"] == "unreadable")
        // The notification's own attributes go with the letter (a replay needs them), and the letter as JSON data.
        #expect(letters.first?.message.attributes["objectId"] == "in/raced.jpg", "\(letters)")
        #expect(letters.first?.message.attributes["objectGeneration"] == "11")
        #expect(letters.first?.message.attributes["eventTime"] == "2026-11-25T16:00:00.000000Z")
        let letter = try letters.first.map { try JSONDecoder().decode(DeadLetter.self, from: $0.message.data) }
        #expect(letter?.version == "11" && letter?.eventTime == "2026-11-25T16:00:00.000000Z" && letter?.event == "OBJECT_FINALIZE", "\(String(describing: letter))")
        // Of another size than announced: refused from its Content-Length, not read twice.
        #expect(letters.first?.message.attributes["snapthumb.message"]?.contains("the notification says \(other.count)") == true, "\(letters)")
        #expect(letters.first?.message.attributes["snapthumb.message"]?.contains("MD5") == true
                    || letters.first?.message.attributes["snapthumb.message"]?.contains("the notification says") == true, "\(letters)")
        let superseded = worker.log.split(separator: "\n").filter { $0.contains("superseded") }
        #expect(superseded.count == 1, "\(superseded)")
        #expect(superseded.first?.contains("gone.jpg") == true && superseded.first?.contains("deleted") == true)
        #expect(!FileManager.default.fileExists(atPath: store + "/manifests/raced.jpg.json"))
        #expect(!FileManager.default.fileExists(atPath: store + "/manifests/gone.jpg.json"))
        #expect(try await_ { try await pubsub.pull(subscription, maxMessages: 10, wait: 0) }.isEmpty)
    }

    @Test("SIGTERM while notifications arrive: every message not acknowledged is handed back at once (a 600 s ack deadline never runs out), including what a pull under way brought")
    func sigtermHandsBack() throws {
        let emulator = try PubSubEmulatorProcess.shared.get()
        let pubsub = try emulator.client()
        let (moto, uploads) = try Moto.withBucket()
        let project = try Project(pubsub)
        let (topic, subscription) = (project.topic, project.subscription)
        let store = Repo.tempDirectory("snapthumb-pubsub-term")
        defer { Fixtures.remove(store) }
        let env = moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 }
        let client = try moto.client(bucket: uploads)
        var names: [String] = []
        var generation: Int64 = 1_732_540_100_000_000
        func notify(_ name: String) throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[names.count % 6])"))))
            _ = try client.put(name, body: bytes, contentType: "image/jpeg")
            generation += 1
            let message = Self.notification(bucket: uploads, name: name, bytes: bytes, generation: generation)
            _ = try await_ { try await pubsub.publish(topic, [message]) }
            names.append(name)
        }
        let worker = try Daemon(["consume", subscription.url, "--source", "s3://\(uploads)/in/", "--store", store, "--jobs", "1", "--log-format", "json",
                                 "--dead-letter-topic", project.dlq.name, "--image-timeout", "30m", "--visibility-timeout", "600s"], environment: env)
        #expect(Self.untilDone(progress: { worker.log.count }, done: { worker.log.contains("\"msg\":\"consuming\"") }), "\(worker.log)")
        for i in 0..<8 {
            try notify("in/term \(i).jpg")
            if i == 3 { kill(worker.process.processIdentifier, SIGTERM) }
        }
        #expect(worker.wait(120) == 0, "\(worker.log.suffix(3000))")
        let published = Set(((try? FileManager.default.contentsOfDirectory(atPath: store + "/manifests")) ?? []).map { String($0.dropLast(".json".count)) })
        // What was not published must be on the subscription now, not hidden for 600 s.
        var back = Set<String>()
        var empty = 0
        while empty < 3 {
            let batch = try await_ { try await pubsub.pull(subscription, maxMessages: 10, wait: 2) }
            if batch.isEmpty { empty += 1; continue }
            for received in batch { if let id = received.message.attributes["objectId"] { back.insert(String(id.dropFirst("in/".count))) } }
            try await_ { try await pubsub.acknowledge(subscription, ackIDs: batch.map(\.ackID)) }
        }
        let all = Set(names.map { String($0.dropFirst("in/".count)) })
        #expect(published.union(back) == all, "published \(published), handed back \(back)\n\(worker.log.suffix(3000))")
    }

    @Test("start-up: a subscription that does not exist exits 2 naming the queue; a malformed gcppubsub URL or topic is a usage error")
    func startupChecks() throws {
        let emulator = try PubSubEmulatorProcess.shared.get()
        let (moto, uploads) = try Moto.withBucket()
        let env = moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 }
        let dir = NSTemporaryDirectory() + "snapthumb-pubsub-\(UUID().uuidString)"
        let missing = try CloudCLI.run(["consume", "gcppubsub://projects/proj-none/subscriptions/nothing-here", "--source", "s3://\(uploads)/", "--store", dir], environment: env)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("consume: the queue: "), "\(missing.stderr)")
        #expect(missing.stderr.contains("NOT_FOUND"), "\(missing.stderr)")
        let badURL = try CloudCLI.run(["consume", "gcppubsub://projects/proj-x/topics/uploads", "--source", "s3://\(uploads)/", "--store", dir], environment: env)
        #expect(badURL.status == 2, "\(badURL.stderr)")
        let badTopic = try CloudCLI.run(["consume", "gcppubsub://projects/proj-x/subscriptions/snaps", "--source", "s3://\(uploads)/", "--store", dir,
                                    "--dead-letter-topic", "snap-dead-letters"], environment: env)
        #expect(badTopic.status != 0)
        #expect(badTopic.stderr.contains("projects/PROJECT/topics/NAME"), "\(badTopic.stderr)")
    }
}
