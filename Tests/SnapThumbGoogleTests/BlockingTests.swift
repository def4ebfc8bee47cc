@testable import SystemKit
import Foundation
import Testing
@testable import SnapThumbGoogle

/// Runs `body` on a thread of its own, as the runner's job sources run: a blocking wait
/// on the concurrency pool's threads (where Swift Testing runs even synchronous tests)
/// could starve the very task it waits for.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

@Suite struct BlockingTests {
    @Test func aThreadWaitsForTheValueOrTheError() async throws {
        #expect(try await onThread { try BlockingCall { 41 + 1 }.wait() } == 42)
        let failing = BlockingCall<Int> { throw GoogleError(.invalid, "no") }
        await #expect(throws: GoogleError(.invalid, "no")) { try await onThread { try failing.wait() } }
        await #expect(throws: GoogleError(.invalid, "no")) { try await onThread { try failing.wait() } }
    }

    @Test func cancellingFromAnotherThreadEndsTheWait() async throws {
        let call = BlockingCall<Int> {
            try await Task.sleep(nanoseconds: 600 * 1_000_000_000)
            return 1
        }
        Thread { call.cancel() }.start()
        await #expect(throws: CancellationError.self) { try await onThread { try call.wait() } }
    }

    @Test func deadLetterAttributesKeepTheOriginalAndFitPubSubsLimits() throws {
        let original = StorageNotificationTests.finalize(name: "snaps/broken.jpg")
        let long = String(repeating: "é", count: 700) // 1400 bytes
        let letter = DeadLetterMessage.make(original: PubSubMessage(data: original.data, attributes: original.attributes, messageID: "77"),
                                            key: "broken.jpg", code: "corrupt", message: long, object: "gs://flick-app.appspot.com/snaps/broken.jpg",
                                            worker: "host-1")
        #expect(letter.data == original.data)
        #expect(letter.attributes["eventType"] == "OBJECT_FINALIZE")
        #expect(letter.attributes["snapthumb.key"] == "broken.jpg")
        #expect(letter.attributes["snapthumb.code"] == "corrupt")
        #expect(letter.attributes["snapthumb.messageId"] == "77")
        #expect(letter.attributes["snapthumb.worker"] == "host-1")
        let clipped = try #require(letter.attributes["snapthumb.message"])
        #expect(clipped.utf8.count <= 1024)
        #expect(clipped.hasSuffix("…"))
        #expect(clipped.dropLast().allSatisfy { $0 == "é" })
        let bare = DeadLetterMessage.make(original: nil, key: nil, code: "unsupported", message: "not a notification")
        #expect(bare.attributes == ["snapthumb.code": "unsupported", "snapthumb.message": "not a notification"])
    }
}
