@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
@testable import SnapThumbCore
@testable import SnapThumbS3

/// The pieces of the bucket store's distrust that need no server.
@Suite("S3 trust, no server")
struct S3TrustUnitTests {
    @Test("an ETag is spelled quoted (S3) or bare (RGW compares the header literally with its unquoted ETag)")
    func etagSpellings() {
        #expect(S3Store.ETagForm.quoted.spell("\"312d\"") == "\"312d\"")
        #expect(S3Store.ETagForm.bare.spell("\"312d\"") == "312d")
        #expect(S3Store.ETagForm.quoted.spell("312d") == "\"312d\"")
        #expect(S3Store.ETagForm.bare.spell("312d") == "312d")
    }

    @Test("a body whose length is not its Content-Length is damaged; a decoded one is not judged by it")
    func lengths() {
        func response(_ headers: [String: String], _ body: Int) -> S3Response {
            S3Response(status: 200, headers: headers, body: Data(repeating: 1, count: body))
        }
        #expect(S3Client.lengthProblem(response(["content-length": "10"], 10)) == nil)
        #expect(S3Client.lengthProblem(response([:], 10)) == nil)
        #expect(S3Client.lengthProblem(response(["content-length": "10"], 5))?.contains("5 bytes where Content-Length said 10") == true)
        #expect(S3Client.lengthProblem(response(["content-length": "10", "content-encoding": "gzip"], 25)) == nil)
        #expect(S3Client.userAgent == "snapthumb/\(SnapThumbVersion.current)")
    }

    @Test("create-only=proven|unchecked rides on the URL to worker processes; anything else is refused")
    func createOnlyOption() throws {
        let env = ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]
        #expect(try S3Configuration(url: "s3://bucket/p", environment: env).createOnlyCheck == .probe)
        #expect(try S3Configuration(url: "s3://bucket/p?create-only=proven", environment: env).createOnlyCheck == .proven)
        #expect(try S3Configuration(url: "s3://bucket/p?path-style=true&create-only=unchecked", environment: env).createOnlyCheck == .unchecked)
        #expect(throws: SnapError.self) { try S3Configuration(url: "s3://bucket/p?create-only=yes", environment: env) }
        let store = S3Store(client: S3Client(configuration: try S3Configuration(url: "s3://bucket/p?create-only=unchecked", environment: env)))
        #expect(store.workerArgument.hasSuffix("create-only=unchecked"))
        try store.proveConditionalWrites() // unchecked: no request at all (there is no server)
        #expect(store.client.requestsSent == 0)
    }

    @Test("an unreadable manifest is a conflict unless replace")
    func unreadable() {
        guard case .refuse(let error) = KeyConflict.decideUnreadable(key: "k", bytes: 0, policy: .refuse) else {
            Issue.record("not refused"); return
        }
        #expect(error.code == .conflict && error.message.contains("cannot be read"))
        #expect(KeyConflict.decideUnreadable(key: "k", bytes: 0, policy: .replace) == .overwrite(previous: nil))
    }

    @Test("a blob claimed by one thread is written once: the others wait, then find it stored")
    func claims() {
        let known = KnownBlobs(["a"])
        #expect(!known.claim("a"))
        let writes = Counter()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            if known.claim("b") {
                writes.add()
                Thread.sleep(forTimeInterval: 0.01)
                known.finished("b", stored: true)
            }
        }
        #expect(writes.value == 1 && known.contains("b"))
        // A failed write hands the claim on.
        #expect(known.claim("c"))
        known.finished("c", stored: false)
        #expect(known.claim("c"))
    }
}

private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add() { lock.lock(); n += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return n }
}
