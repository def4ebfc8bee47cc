@testable import SnapThumbStore
@testable import SystemKit
import Foundation
import Synchronization
@_spi(Testing) import SnapThumbTesting
import Testing
import SnapThumbCore
@testable import SnapThumbRunner
import VipsKit

/// The worker protocol's lines are written and read without Foundation's JSON
/// coders, but they stay the same JSON: each side reads what JSONEncoder writes
/// and JSONDecoder reads what it writes, for every field and awkward strings.
@Suite("Worker protocol lines")
struct WorkerLineTests {
    static let names = ["a.jpg", "dir/ü \"quoted\" \\ back.jpg", "\u{301}a.jpg", "tab\tnl\nctl\u{1}.jpg", "😀.png", "sep\u{2028}.jpg", ""]

    static var jobs: [WorkerProtocol.Job] {
        names.enumerated().map { i, name in
            var job = WorkerProtocol.Job(i: i, path: "/up/\(name)", key: name, size: 1 << (i * 5), absent: i % 2 == 0 ? true : nil,
                                         raw: i == 1 ? [0x63, 0x61, 0x66, 0xE9, 0x00, 0xFF] : nil,
                                         blobs: i == 2 ? [String(repeating: "ab", count: 32), String(repeating: "0f", count: 32)] : nil)
            // What a Cloud Storage notification announced: all of it, or only a generation (payloadFormat NONE).
            if i == 3 { job.expect(SourceExpectation(generation: 1_732_540_000_000_123, size: 4096, md5: Array(0 ..< 16))) }
            if i == 4 { job.expect(SourceExpectation(generation: Int64.max)) }
            return job
        }
    }

    @Test("a notification's generation, size and MD5 cross the pipe exactly (a generation beyond 2^53 included)")
    func expectations() throws {
        let jobs = Self.jobs
        let announced = try #require(WorkerLine.job(Data(WorkerLine.encode(jobs[3])))?.expected)
        #expect(announced == SourceExpectation(generation: 1_732_540_000_000_123, size: 4096, md5: Array(0 ..< 16)))
        #expect(WorkerLine.job(Data(WorkerLine.encode(jobs[4])))?.expected == SourceExpectation(generation: Int64.max))
        #expect(WorkerLine.job(Data(WorkerLine.encode(jobs[0])))?.expected == nil)
    }

    @Test("the bytes read are checked against the size and MD5 announced")
    func mismatch() {
        let bytes = Data("thumbnail source".utf8)
        let md5 = MD5.digest(bytes)
        #expect(SourceExpectation(generation: 7, size: Int64(bytes.count), md5: md5).mismatch(in: bytes) == nil)
        #expect(SourceExpectation(generation: 7).mismatch(in: bytes) == nil)
        #expect(SourceExpectation(size: 3).mismatch(in: bytes) == "read 16 bytes, the notification says 3")
        #expect(SourceExpectation(size: 16, md5: Array(repeating: 0, count: 16)).mismatch(in: bytes)?.contains("MD5") == true)
    }

    static var replies: [WorkerProtocol.Reply] {
        let brief = VariantBrief(bytes: 3917, budget: 4096, budgetMode: .bytes, encodes: 2, degraded: false)
        let inline = VariantBrief(bytes: 12, budget: nil, budgetMode: .inline, encodes: 1, degraded: true)
        return [
            .init(i: 0, outcome: "staged", ms: 3.25, code: nil, message: nil, variants: nil, rss: 41_000_000),
            .init(i: 1, outcome: "processed", ms: 0.000123, code: nil, message: nil,
                  variants: ["square100": brief, "pixel25": inline, "pixel100": brief], rss: 1, digest: "sha256:" + String(repeating: "e", count: 64),
                  replaced: "sha256:" + String(repeating: "1", count: 64), blobs: ["x", "y"]),
            .init(i: 2, outcome: "failed", ms: 1234.5, code: .corrupt, message: names[1] + names[3] + names[4], variants: nil),
            .init(i: 3, outcome: "skipped", ms: 0, code: nil, message: nil, variants: [:]),
        ]
    }

    @Test("jobs: ours and Foundation's read each other")
    func jobs() throws {
        for job in Self.jobs {
            let ours = Data(WorkerLine.encode(job))
            #expect(try JSONDecoder().decode(WorkerProtocol.Job.self, from: ours) == job)
            #expect(WorkerLine.job(try JSONEncoder().encode(job)) == job)
            #expect(WorkerLine.job(ours) == job)
        }
    }

    @Test("replies: ours and Foundation's read each other")
    func replies() throws {
        for reply in Self.replies {
            let ours = Data(WorkerLine.encode(reply))
            #expect(try JSONDecoder().decode(WorkerProtocol.Reply.self, from: ours) == reply)
            #expect(WorkerLine.reply(try JSONEncoder().encode(reply)) == reply)
            #expect(WorkerLine.reply(ours) == reply)
        }
    }

    @Test("lines that are not the protocol are refused, not guessed")
    func garbage() {
        for text in ["", "{", "[]", "{\"i\":1}", "{\"i\":\"1\",\"path\":\"p\",\"key\":\"k\",\"size\":1}", "{\"i\":1,\"path\":\"p\",\"key\":\"k\",\"size\":1} x",
                     "{\"i\":1,\"outcome\":\"processed\",\"ms\":1,\"variants\":{\"square100\":{}}}", "{\"s\":\"\\ud83d\"}"] {
            #expect(WorkerLine.job(Data(text.utf8)) == nil, "\(text)")
            #expect(WorkerLine.reply(Data(text.utf8)) == nil, "\(text)")
        }
    }
}

@Suite("A worker's answers")
struct AnswerWriterTests {
    /// Every write the writer makes, as the lines it held.
    final class Writes: Sendable {
        let all = Mutex<[[String]]>([])
        func record(_ data: Data) {
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
            all.withLock { $0.append(lines) }
        }
        var lines: [[String]] { all.withLock { $0 } }
    }

    private static func line(_ text: String) -> Data { Data((text + "\n").utf8) }

    @Test("a batch run's worker writes up to four staged answers together, and every other answer at once after them, in order")
    func batch() {
        let writes = Writes()
        let answers = AnswerWriter(holding: 4) { writes.record($0) }
        for i in 0..<3 { answers.answer(Self.line("s\(i)"), mayWait: true) }
        #expect(writes.lines.isEmpty)
        answers.answer(Self.line("s3"), mayWait: true)
        #expect(writes.lines == [["s0", "s1", "s2", "s3"]])
        answers.answer(Self.line("s4"), mayWait: true)
        answers.answer(Self.line("p0"), mayWait: false)
        #expect(writes.lines.last == ["s4", "p0"])
        answers.answer(Self.line("s5"), mayWait: true)
        answers.writeHeld()
        answers.writeHeld()
        #expect(writes.lines.last == ["s5"])
        #expect(writes.lines.count == 3)
    }

    @Test("a daemon's worker writes each answer at once")
    func daemon() {
        let writes = Writes()
        let answers = AnswerWriter(holding: 1) { writes.record($0) }
        answers.answer(Self.line("s0"), mayWait: true)
        answers.answer(Self.line("p0"), mayWait: false)
        answers.writeHeld()
        #expect(writes.lines == [["s0"], ["p0"]])
    }
}
