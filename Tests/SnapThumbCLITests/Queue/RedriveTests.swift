import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3
@testable import SnapThumbQueue

/// `snapthumb redrive` against moto's SQS: uploads refused by a consumer (a limit set too low),
/// the cause fixed, the letters replayed until the dead-letter queue is empty.
@Suite("redrive", .serialized, .enabled(if: Repo.motoAvailable))
struct RedriveTests {
    static func run(_ arguments: [String], _ moto: Moto) throws -> CloudCLI.Result {
        try CloudCLI.run(arguments, environment: moto.environment().merging(["AWS_ENDPOINT_URL_SQS": moto.endpoint]) { $1 })
    }

    @Test("refused uploads are replayed after the fix: dry run lists and changes nothing; redrive sends each as its S3 event, deletes the letter after the send; the queue's own redriven events go back as they are; a letter naming no upload stays")
    func replay() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, deadLetter) = try moto.makeQueue(uniqueName("redrive"), visibility: 10, maxReceives: 10)
        let dlq = try #require(deadLetter)
        try moto.notify(bucket: uploads, queueURL: queue)
        let client = try moto.client(bucket: uploads)
        let keys = ["a b+c.jpg", "d/e.jpg", "f%g.png"]
        for (i, key) in keys.enumerated() {
            _ = try client.put("in/" + key, body: [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[i])")))),
                               contentType: "image/jpeg")
        }
        let sqs = try moto.sqs(queueURL: queue)
        try sqs.send(body: "not json at all")
        let source = "s3://\(uploads)/in/", store = "s3://\(thumbs)/v1"

        // The cause: a byte limit far too low; every upload is refused as too-large.
        let strict = try ConsumeTests.consume(moto, queue: queue, source: source, store: store, extra: ["--jobs", "1", "--max-bytes", "100"])
        let refused = try eventually(within: 60, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            let dead = try moto.depth(dlq).visible
            return visible == 0 && hidden == 0 && dead == keys.count + 1
        }
        #expect(refused, "\(strict.log)")
        #expect(strict.terminate() == 0)
        #expect(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/").isEmpty)
        // An event moved by the queue's own redrive policy (not a letter) sits there too.
        let original = "{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"\(uploads)\"},\"object\":{\"key\":\"in/d/e.jpg\",\"size\":1}}}]}"
        _ = try sqs.send(body: original, to: dlq)

        let dry = try Self.run(["redrive", dlq, "--to", queue, "--dry-run"], moto)
        #expect(dry.status == 0, "\(dry.stderr)")
        let listed = dry.stdout.split(separator: "\n")
        #expect(listed.filter { $0.hasPrefix("would send\ts3://\(uploads)/in/") }.count == keys.count + 1, "\(dry.stdout)")
        #expect(listed.filter { $0.hasPrefix("would send") && $0.hasSuffix("\ttoo-large") }.count == keys.count, "\(dry.stdout)")
        #expect(listed.filter { $0.hasPrefix("left\t") }.count == 1, "\(dry.stdout)")
        for key in keys { #expect(dry.stdout.contains("s3://\(uploads)/in/\(key)\t"), "\(key): \(dry.stdout)") }
        #expect(try moto.depth(dlq) == (keys.count + 2, 0), "a dry run sends and deletes nothing, and hides nothing")
        #expect(try moto.depth(queue) == (0, 0))

        // The cause fixed (no such limit), redrive, and a consumer publishes every key.
        let result = try Self.run(["redrive", dlq, "--to", queue, "--log-format", "json"], moto)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").filter { $0.hasPrefix("sent\t") }.count == keys.count + 1, "\(result.stdout)")
        #expect(result.stderr.contains("\"snap.sent\":\(keys.count + 1)") && result.stderr.contains("\"snap.left\":1"), "\(result.stderr)")
        #expect(try moto.depth(dlq) == (1, 0), "only the letter that names no upload stays")
        let fixed = try ConsumeTests.consume(moto, queue: queue, source: source, store: store, extra: ["--jobs", "1"])
        let published = try eventually(within: 60, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            let published = try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/")
            return visible == 0 && hidden == 0 && Set(published) == Set(keys)
        }
        #expect(published, "\(fixed.log)")
        #expect(fixed.terminate() == 0)
        #expect(try moto.depth(dlq) == (1, 0), "nothing was refused again")
        let left = try moto.drain(dlq)
        #expect(left.count == 1 && left[0].body.contains("\"body\":\"not json at all\""), "\(left)")
        // Nothing left: a redrive of an empty queue says so and succeeds.
        let empty = try Self.run(["redrive", dlq, "--to", queue], moto)
        #expect(empty.status == 0 && empty.stdout.isEmpty, "\(empty.stdout)\(empty.stderr)")
    }

    @Test("a queue that cannot be reached is a start-up failure (exit 2) naming which; --to must be a topic for a subscription")
    func mistakes() throws {
        let (moto, _) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("redrive-x"), visibility: 10)
        let missing = try Self.run(["redrive", "\(moto.endpoint)/123456789012/no-such-queue", "--to", queue], moto)
        #expect(missing.status == 2 && missing.stderr.hasPrefix("redrive: the dead-letter queue: "), "\(missing.stderr)")
        let to = try Self.run(["redrive", queue, "--to", "\(moto.endpoint)/123456789012/no-such-queue"], moto)
        #expect(to.status == 2 && to.stderr.hasPrefix("redrive: --to: "), "\(to.stderr)")
        let topic = try Self.run(["redrive", "gcppubsub://projects/proj-x/subscriptions/snaps-dlq", "--to", queue], moto)
        #expect(topic.status == 2 && topic.stderr.contains("--to must be the notifications' topic"), "\(topic.stderr)")
    }
}

/// `snapthumb redrive` from a Pub/Sub dead-letter subscription to the notifications' topic, on
/// Google's emulator (skipped where it is not installed).
@Suite("redrive (Pub/Sub)", .serialized, .enabled(if: Repo.motoAvailable && PubSubEmulatorProcess.installed))
struct PubSubRedriveTests {
    @Test("a refused upload, fixed in the bucket, replayed from the dead-letter subscription: published, the letter acknowledged, nothing left")
    func replay() throws {
        let emulator = try PubSubEmulatorProcess.shared.get()
        let pubsub = try emulator.client()
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let project = try PubSubConsumeTests.Project(pubsub)
        let env = moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 }
        let client = try moto.client(bucket: uploads)
        let bad = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("bad/corrupt.jpg"))))
        _ = try client.put("in/a b.jpg", body: bad, contentType: "image/jpeg")
        let message = PubSubConsumeTests.notification(bucket: uploads, name: "in/a b.jpg", bytes: bad, generation: 7)
        let topic = project.topic
        _ = try await_ { try await pubsub.publish(topic, [message]) }
        let daemon = try Daemon(["consume", project.subscription.url, "--source", "s3://\(uploads)/in/", "--store", "s3://\(thumbs)/v1",
                                 "--jobs", "1", "--log-format", "json", "--dead-letter-topic", project.dlq.name], environment: env)
        defer { _ = daemon.terminate(within: 10) }
        #expect(eventually(within: 120) { daemon.log.contains("sent to the dead-letter queue") }, "\(daemon.log)")

        // The fix: the object replaced by good bytes (no notification of its own here).
        _ = try client.put("in/a b.jpg", body: [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/grey.jpg")))), contentType: "image/jpeg")
        let dry = try CloudCLI.run(["redrive", project.watcher.url, "--to", project.topic.name, "--dry-run"], environment: env)
        #expect(dry.status == 0 && dry.stdout == "would send\ts3://\(uploads)/in/a b.jpg\tcorrupt\n", "\(dry.stdout)\(dry.stderr)")
        let sent = try CloudCLI.run(["redrive", project.watcher.url, "--to", project.topic.name], environment: env)
        #expect(sent.status == 0 && sent.stdout == "sent\ts3://\(uploads)/in/a b.jpg\tcorrupt\n", "\(sent.stdout)\(sent.stderr)")
        let published = try eventually(within: 120, every: 0.5) {
            try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/") == ["a b.jpg"]
        }
        #expect(published, "\(daemon.log)")
        let again = try CloudCLI.run(["redrive", project.watcher.url, "--to", project.topic.name], environment: env)
        #expect(again.status == 0 && again.stdout.isEmpty, "the letter was acknowledged: \(again.stdout)")
    }
}
