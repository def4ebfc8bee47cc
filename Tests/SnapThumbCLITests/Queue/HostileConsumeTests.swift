#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import VipsKit

/// `snapthumb consume` against moto's S3 and SQS (SigV4 checked) with hostile messages and
/// objects, and SIGTERM while messages arrive.
@Suite("consume: hostile input and shutdown", .serialized, .enabled(if: Repo.motoAvailable))
struct HostileConsumeTests {
    static func record(bucket: String, key encoded: String, size: Int, time: String = "2026-11-25T16:00:00.000Z") -> String {
        "{\"eventName\":\"ObjectCreated:Put\",\"eventTime\":\"\(time)\",\"s3\":{\"bucket\":{\"name\":\"\(bucket)\"},\"object\":{\"key\":\"\(encoded)\",\"size\":\(size)}}}"
    }

    static func letters(_ moto: Moto, _ dlq: String) throws -> [DeadLetter] {
        try moto.drain(dlq).map { try JSONDecoder().decode(DeadLetter.self, from: Data($0.body.utf8)) }
    }

    @Test("an event for a missing object is superseded at once and the good uploads behind it are published; 2,000 records of one key make one letter; a broken percent-encoding makes a letter with the reason; a too-large upload is refused from its announced size; nothing pauses receiving")
    func hostile() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, deadLetter) = try moto.makeQueue(uniqueName("hostile"), visibility: 30, maxReceives: 5)
        let dlq = try #require(deadLetter)
        let sqs = try moto.sqs(queueURL: queue)
        let client = try moto.client(bucket: uploads)
        // The missing object first, then the hostile messages, then good uploads behind them.
        try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/never+there.jpg", size: 5000))]}")
        // Short records: the message must stay within SQS's 256 KiB.
        let many = Array(repeating: "{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"\(uploads)\"},\"object\":{\"key\":\"in/s.jpg\"}}}",
                         count: 2000).joined(separator: ",")
        try sqs.send(body: "{\"Records\":[\(many)]}")
        try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/bad%ZZkey%.jpg", size: 10))]}")
        // Announced as 8 MB (over --max-bytes): refused without reading the object.
        _ = try client.put("in/huge.jpg", body: Array(repeating: 7, count: 4096), contentType: "image/jpeg")
        try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/huge.jpg", size: 8 << 20))]}")
        var keys: [String] = []
        for i in 0..<4 {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[i])"))))
            _ = try client.put("in/good \(i).jpg", body: bytes, contentType: "image/jpeg")
            try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/good+\(i).jpg", size: bytes.count))]}")
            keys.append("good \(i).jpg")
        }
        let daemon = try ConsumeTests.consume(moto, queue: queue, source: "s3://\(uploads)/in/", store: "s3://\(thumbs)/t",
                                              extra: ["--max-bytes", "1048576"])
        defer { _ = daemon.terminate(within: 30) }
        #expect(try eventually(within: 120, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            let published = try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "t/").count
            return visible == 0 && hidden == 0 && published == keys.count
        }, "\(daemon.log.suffix(4000))")
        #expect(daemon.terminate() == 0)
        let log = daemon.log
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "t/")) == Set(keys))
        let superseded = log.split(separator: "\n").filter { $0.contains("\"snap.result\":\"superseded\"") }
        #expect(superseded.count == 1 && superseded.first?.contains("never there.jpg") == true && superseded.first?.contains("deleted") == true, "\(superseded)")
        #expect(!log.contains("receiving pauses"), "\(log)")
        #expect(!log.contains("\"snap.result\":\"retry\""), "\(log)")
        #expect(log.split(separator: "\n").allSatisfy { $0.utf8.count < 16 * 1024 })

        let letters = try Self.letters(moto, dlq)
        #expect(letters.count == 3, "\(letters)")
        let whole = letters.filter { $0.message.contains("2000 records") }
        #expect(whole.count == 1 && whole.first?.code == "unsupported")
        let broken = letters.first { $0.object == "s3://\(uploads)/in/bad%ZZkey%.jpg" }
        #expect(broken?.message.contains("not URL-encoded") == true && broken?.eventTime == "2026-11-25T16:00:00.000Z" && broken?.bucket == uploads, "\(letters)")
        let huge = letters.first { $0.key == "huge.jpg" }
        #expect(huge?.code == "too-large" && huge?.message.contains("\(8 << 20) bytes") == true, "\(letters)")
        #expect(huge?.eventTime == "2026-11-25T16:00:00.000Z" && huge?.event == "ObjectCreated:Put")
    }

    @Test("an object whose every read is cut short (the fault proxy) delays only its own message, retried with a growing backoff; the good uploads behind it are published and receiving never pauses")
    func failingObjectDelaysOnlyItself() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("cursed"), visibility: 30)
        let sqs = try moto.sqs(queueURL: queue)
        let client = try moto.client(bucket: uploads)
        let cursed = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/grey.jpg"))))
        _ = try client.put("in/cursed.jpg", body: cursed, contentType: "image/jpeg")
        try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/cursed.jpg", size: cursed.count))]}")
        var keys: [String] = []
        for i in 0..<4 {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[i])"))))
            _ = try client.put("in/fine \(i).jpg", body: bytes, contentType: "image/jpeg")
            try sqs.send(body: "{\"Records\":[\(Self.record(bucket: uploads, key: "in/fine+\(i).jpg", size: bytes.count))]}")
            keys.append("fine \(i).jpg")
        }
        // Every answer to a GET of the cursed object comes cut in half under its full Content-Length.
        let proxy = try FaultProxy(upstreamPort: moto.port, misbehaviour: ["--garble-get", "cursed", "--garble-rate", "1", "--garble-mode", "cut"])
        let daemon = try ConsumeTests.consume(moto, queue: queue, source: "s3://\(uploads)/in/", store: "s3://\(thumbs)/t",
                                              extra: ["--jobs", "1"], env: ["AWS_ENDPOINT_URL_S3": proxy.endpoint])
        defer { _ = daemon.terminate(within: 30) }
        // The good uploads, and the cursed one retried at least twice (its second retry waits longer than its first).
        #expect(try eventually(within: 180, every: 0.5) {
            let published = try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "t/").count
            return published == keys.count && daemon.log.components(separatedBy: "\"snap.retry_in_s\"").count > 2
        }, "\(daemon.log.suffix(4000))")
        #expect(daemon.terminate() == 0)
        let log = daemon.log
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "t/")) == Set(keys))
        #expect(!log.contains("receiving pauses"), "\(log)")
        // JSON log lines: the delay is a JSON number.
        let delays = log.split(separator: "\n").filter { $0.contains("left on the queue for a retry") }
            .compactMap { line in (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["snap.retry_in_s"] as? Double }
        #expect(delays.count >= 2 && delays[0] == 1 && delays[1] == 2, "\(delays)")
        // Still there for a later retry: never acknowledged, never dead-lettered by SnapThumb.
        let depth = try moto.depth(queue)
        #expect(depth.visible + depth.hidden == 1, "\(depth)")
    }

    @Test("SIGTERM in three bursts of arriving messages: no message is left hidden after the worker exits, and a last worker publishes every upload once")
    func sigtermBursts() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("bursts"), visibility: 120)
        let sqs = try moto.sqs(queueURL: queue)
        let client = try moto.client(bucket: uploads)
        var keys: Set<String> = []
        var sizes: [String: Int] = [:]
        for i in 0..<6 {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[i])"))))
            _ = try client.put("in/b\(i).jpg", body: bytes, contentType: "image/jpeg")
            sizes["b\(i).jpg"] = bytes.count
            keys.insert("b\(i).jpg")
        }
        for round in 0..<3 {
            let daemon = try ConsumeTests.consume(moto, queue: queue, source: "s3://\(uploads)/in/", store: "s3://\(thumbs)/t",
                                                  extra: ["--jobs", "1", "--drain-timeout", "25s"])
            #expect(eventually(within: 60) { daemon.log.contains("\"msg\":\"consuming\"") }, "\(daemon.log)")
            // A burst: messages arrive while the worker's long poll is open; SIGTERM lands among them.
            for (i, key) in keys.sorted().enumerated() {
                try sqs.send(body: "{\"Records\":[\(HostileConsumeTests.record(bucket: uploads, key: "in/\(key)", size: sizes[key]!))]}")
                if i == 2 + round { kill(daemon.process.processIdentifier, SIGTERM) }
            }
            #expect(daemon.wait(90) == 0, "\(daemon.log.suffix(3000))")
            // Released, or deleted: none waits out the 120 s visibility timeout.
            let hidden = try moto.depth(queue).hidden
            #expect(hidden == 0, "round \(round): \(hidden) hidden\n\(daemon.log.suffix(3000))")
        }
        let last = try ConsumeTests.consume(moto, queue: queue, source: "s3://\(uploads)/in/", store: "s3://\(thumbs)/t")
        #expect(try eventually(within: 120, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            return visible == 0 && hidden == 0
        }, "\(last.log.suffix(3000))")
        #expect(last.terminate() == 0)
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "t/")) == keys)
    }
}
