@testable import SystemKit
import Foundation
import SnapThumbTesting
import Testing
@testable import SnapThumbGoogle

/// Google's Pub/Sub emulator on 127.0.0.1, started by Scripts/pubsub-emulator.sh (`run`):
/// one per test process, stopped (its whole process group) when this process's end
/// closes the script's standard input. Each test works in a project of its own.
final class PubSubEmulator: @unchecked Sendable {
    let helper: ServerProcess
    let host: String

    /// Whether the emulator (google-cloud-cli-pubsub-emulator) and Java are installed. When they
    /// are not, the tests that need them are skipped, unless SNAPTHUMB_REQUIRE_PUBSUB_EMULATOR=1.
    static let installed: Bool = {
        if ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_PUBSUB_EMULATOR"] == "1" { return true }
        return (try? run("/bin/bash", ["\(Repo.root)/Scripts/pubsub-emulator.sh", "available"]).status) == 0
    }()

    static let shared: Result<PubSubEmulator, GoogleError> = {
        do {
            let helper = try ServerProcess("/bin/bash", ["\(Repo.root)/Scripts/pubsub-emulator.sh", "run"])
            guard helper.firstLine.hasPrefix("host ") else {
                helper.stop()
                return .failure(GoogleError(.unavailable, "the Pub/Sub emulator did not start: \(helper.firstLine)"))
            }
            return .success(PubSubEmulator(helper: helper, host: String(helper.firstLine.dropFirst(5))))
        } catch {
            return .failure(GoogleError(.unavailable, "Scripts/pubsub-emulator.sh: \(error)"))
        }
    }()

    private init(helper: ServerProcess, host: String) {
        self.helper = helper
        self.host = host
    }

    /// A client of the shared emulator, found as `consume` finds it: through PUBSUB_EMULATOR_HOST.
    static func client() throws -> PubSubClient {
        let emulator = try shared.get()
        return try PubSubClient.fromEnvironment(["PUBSUB_EMULATOR_HOST": emulator.host], retry: GoogleRetryPolicy(attempts: 3, base: 0.05, cap: 0.2))
    }

    /// A fresh project id, so that tests running at once never meet.
    static func project() -> String { "proj-" + UUID().uuidString.lowercased().prefix(12) }
}

@Suite(.enabled(if: PubSubEmulator.installed, "the Pub/Sub emulator is not installed (google-cloud-cli-pubsub-emulator, with Java): skipped"))
struct PubSubEmulatorTests {
    /// Pulls until `count` messages have come (the emulator may hand them out over several pulls).
    func pull(_ client: PubSubClient, _ subscription: PubSubSubscription, count: Int) async throws -> [ReceivedMessage] {
        var received: [ReceivedMessage] = []
        while received.count < count {
            received += try await client.pull(subscription, maxMessages: count - received.count, wait: 30)
        }
        return received
    }

    @Test func aNotificationIsPulledParsedAndAcknowledged() async throws {
        let client = try PubSubEmulator.client()
        #expect(client.tokens == nil)
        let project = PubSubEmulator.project()
        let topic = try PubSubTopic(project: project, id: "uploads")
        let dlq = try PubSubTopic(project: project, id: "uploads-dead-letters")
        let subscription = try PubSubSubscription(project: project, id: "snapthumb")
        try await client.createTopic(topic)
        try await client.createTopic(dlq)
        try await client.createSubscription(subscription, topic: topic, ackDeadlineSeconds: 30, deadLetter: (dlq, 5))

        let info = try await client.subscription(subscription)
        #expect(info.topic == topic.name)
        #expect(info.ackDeadlineSeconds == 30)
        #expect(info.deadLetterTopic == dlq)
        #expect(info.maxDeliveryAttempts == 5)

        let upload = StorageNotificationTests.finalize(name: "snaps/a snap.jpg")
        var delete = StorageNotificationTests.finalize(name: "snaps/old.jpg")
        delete = PubSubMessage(data: delete.data, attributes: delete.attributes.merging(["eventType": "OBJECT_DELETE"]) { $1 })
        let ids = try await client.publish(topic, [OutgoingMessage(data: upload.data, attributes: upload.attributes),
                                                   OutgoingMessage(data: delete.data, attributes: delete.attributes)])
        #expect(ids.count == 2)

        let received = try await pull(client, subscription, count: 2).sorted { $0.message.messageID < $1.message.messageID }
        #expect(received.map(\.message.messageID) == ids.sorted())
        #expect(received.allSatisfy { $0.deliveryAttempt == 1 })
        let events = try received.map { try StorageNotification.parse($0.message) }
        let uploadEvent = try #require(events.first { if case .upload = $0 { true } else { false } })
        guard case .upload(let object) = uploadEvent else { return }
        #expect(object.name == "snaps/a snap.jpg")
        #expect(object.size == Int64(StorageNotificationTests.bytes.count) && object.md5 == MD5.digest(StorageNotificationTests.bytes))
        #expect(events.contains(.ignored(reason: "OBJECT_DELETE for gs://flick-app.appspot.com/snaps/old.jpg: only OBJECT_FINALIZE makes thumbnails")))

        try await client.acknowledge(subscription, ackIDs: received.map(\.ackID))
        #expect(try await client.pull(subscription, maxMessages: 10, wait: 0).isEmpty)
    }

    @Test func deadlinesHandBackExtendAndExpire() async throws {
        let client = try PubSubEmulator.client()
        let project = PubSubEmulator.project()
        let topic = try PubSubTopic(project: project, id: "uploads")
        let dlq = try PubSubTopic(project: project, id: "dead-letters")
        let subscription = try PubSubSubscription(project: project, id: "snapthumb")
        try await client.createTopic(topic)
        try await client.createTopic(dlq)
        // The shortest ack deadline Pub/Sub allows: 10 s.
        try await client.createSubscription(subscription, topic: topic, ackDeadlineSeconds: 10, deadLetter: (dlq, 10))
        try await client.publish(topic, [OutgoingMessage(data: Data("a".utf8)), OutgoingMessage(data: Data("b".utf8))])
        let first = try await pull(client, subscription, count: 2)
        let a = try #require(first.first { $0.message.data == Data("a".utf8) })
        let b = try #require(first.first { $0.message.data == Data("b".utf8) })
        // a is extended to Pub/Sub's longest deadline (600 s) at once, before anything slow
        // (on a loaded machine the steps below took minutes, and a lapsed in the middle).
        try await client.modifyAckDeadline(subscription, ackIDs: [a.ackID], seconds: 600)

        // A deadline of 0 hands a message back at once (a worker letting go on SIGTERM).
        try await client.modifyAckDeadline(subscription, ackIDs: [b.ackID], seconds: 0)
        let again = try await pull(client, subscription, count: 1)
        #expect(again.map(\.message.messageID) == [b.message.messageID])
        #expect(again.first?.deliveryAttempt == 2)

        // b's new delivery lapses after 12 s, so when b comes back a third time, a's
        // original 10 s deadline has passed without it: its extension held.
        try await client.modifyAckDeadline(subscription, ackIDs: [again[0].ackID], seconds: 12)
        let third = try await pull(client, subscription, count: 1)
        // Held from here on, so that nothing comes back while the machine is slow.
        try await client.modifyAckDeadline(subscription, ackIDs: third.map(\.ackID), seconds: 600)
        #expect(third.map(\.message.messageID) == [b.message.messageID])
        #expect(third.first?.deliveryAttempt == 3)
        #expect(try await client.pull(subscription, maxMessages: 10, wait: 0).isEmpty)

        // An ack with the first delivery's id still counts for a (its lease was extended).
        try await client.acknowledge(subscription, ackIDs: [a.ackID, third[0].ackID])
        #expect(try await client.pull(subscription, maxMessages: 10, wait: 0).isEmpty)
    }

    @Test func aRefusedUploadGoesToTheDeadLetterTopicWithItsAttributes() async throws {
        let client = try PubSubEmulator.client()
        let project = PubSubEmulator.project()
        let dlq = try PubSubTopic(project: project, id: "snap-dead-letters")
        let watcher = try PubSubSubscription(project: project, id: "dead-letter-watcher")
        try await client.createTopic(dlq)
        try await client.createSubscription(watcher, topic: dlq)
        let original = StorageNotificationTests.finalize(name: "snaps/broken one.jpg")
        let attributes = original.attributes.merging([
            "snapthumb.key": "broken one.jpg", "snapthumb.code": "corrupt",
            "snapthumb.message": "broken one.jpg: not a decodable JPEG (libjpeg: premature end of data)",
        ]) { $1 }
        let ids = try await client.publish(dlq, [OutgoingMessage(data: original.data, attributes: attributes)])
        let received = try await pull(client, watcher, count: 1)
        #expect(received.map(\.message.messageID) == ids)
        #expect(received[0].message.attributes == attributes)
        #expect(received[0].message.data == original.data)
        #expect(received[0].deliveryAttempt == nil) // no dead-letter policy on the watcher
        try await client.acknowledge(watcher, ackIDs: received.map(\.ackID))
    }

    @Test func errorsAreSortedByWhatToDoAboutThem() async throws {
        let client = try PubSubEmulator.client()
        let project = PubSubEmulator.project()
        let missing = try PubSubSubscription(project: project, id: "nothing-here")
        let notFound = await #expect(throws: GoogleError.self) { try await client.subscription(missing) }
        #expect(notFound?.kind == .notFound)
        #expect(notFound?.message.contains("HTTP 404 NOT_FOUND") == true)
        #expect(notFound?.isTransient == false)
        let pullMissing = await #expect(throws: GoogleError.self) { try await client.pull(missing, wait: 0) }
        #expect(pullMissing?.kind == .notFound)
        let topic = try PubSubTopic(project: project, id: "twice")
        try await client.createTopic(topic)
        let exists = await #expect(throws: GoogleError.self) { try await client.createTopic(topic) }
        #expect(exists?.status == 409)

        // Nothing listening: unavailable (transient) after the retries.
        let nowhere = PubSubClient(endpoint: PubSubEndpoint(baseURL: URL(string: "http://127.0.0.1:9")!, authenticated: false), tokens: nil,
                                   retry: GoogleRetryPolicy(attempts: 2, base: 0.01, cap: 0.02))
        let down = await #expect(throws: GoogleError.self) { try await nowhere.pull(missing, wait: 0) }
        #expect(down?.isTransient == true)
        #expect(down?.snapError.code == .store)
    }

    @Test func aPullWaitsThenComesBackEmptyOrIsCancelled() async throws {
        let client = try PubSubEmulator.client()
        let project = PubSubEmulator.project()
        let topic = try PubSubTopic(project: project, id: "quiet")
        let subscription = try PubSubSubscription(project: project, id: "quiet-sub")
        try await client.createTopic(topic)
        try await client.createSubscription(subscription, topic: topic)
        // The emulator holds an empty pull open: the client gives up after `wait`.
        #expect(try await client.pull(subscription, wait: 1).isEmpty)
        // A worker shutting down cancels its pull. The emulator may end an empty pull on
        // its own before the cancel arrives (a loaded machine sleeps long): then it is
        // asked again; what must never happen is a cancel that does not end the pull.
        var cancelled = false
        for _ in 0..<5 where !cancelled {
            let task = Task { try await client.pull(subscription, wait: 600) }
            try await Task.sleep(nanoseconds: 300_000_000)
            task.cancel()
            do {
                let messages = try await task.value
                #expect(messages.isEmpty, "nothing was published, yet the pull returned \(messages.count)")
            } catch is CancellationError {
                cancelled = true
            }
        }
        #expect(cancelled, "five pulls ended before their cancel: none was ever cancelled")
    }
}
