import Foundation
import Logging
import Testing
@testable import SnapThumbCore

/// `--log-format text|json` and `--log-level`, on every subcommand.
@Suite("Logging", .serialized)
struct LoggingTests {
    @Test("JSON: one object per line with ts (RFC 3339 UTC, milliseconds), level, msg and the metadata as fields")
    func jsonLine() throws {
        let date = Date(timeIntervalSince1970: 1_795_424_274.5678)
        let line = SnapLogHandler.line(format: .json, date: date, level: .warning, label: "snapthumb.watch",
                                       message: "failed \"badly\"", metadata: ["snap.key": "a b.jpg", "snap.n": "3", "nested": ["x": "1"]])
        #expect(!line.contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["ts"] as? String == "2026-11-23T08:57:54.567Z")
        #expect(object["level"] as? String == "warning")
        #expect(object["msg"] as? String == "failed \"badly\"")
        #expect(object["snap.key"] as? String == "a b.jpg")
        #expect((object["nested"] as? [String: String]) == ["x": "1"])
        #expect(line.hasPrefix("{\"ts\":"))
    }

    @Test("timestamps: leap years, the epoch, before it")
    func timestamps() {
        #expect(SnapLogHandler.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(SnapLogHandler.timestamp(Date(timeIntervalSince1970: 951_782_400.001)) == "2000-02-29T00:00:00.001Z")
        #expect(SnapLogHandler.timestamp(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59.000Z")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for seconds in stride(from: 0.0, to: 4_000_000_000, by: 86_399_999.25) {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(SnapLogHandler.timestamp(date) == formatter.string(from: date))
        }
    }

    @Test("text: values with spaces, quotes or '=' are quoted; plain ones are not")
    func textQuoting() {
        let line = SnapLogHandler.line(format: .text, date: Date(timeIntervalSince1970: 0), level: .info, label: "snapthumb.watch",
                                       message: "processed", metadata: ["snap.key": "a.jpg", "snap.error": "not an image", "snap.x": "a=b", "snap.e": ""])
        #expect(line == #"1970-01-01T00:00:00.000Z info snapthumb.watch: processed snap.e="" snap.error="not an image" snap.key=a.jpg snap.x="a=b""#)
    }

    @Test("process --log-format json: failures are JSON lines; text keeps '<file>: <code>: <message>'")
    func processJSON() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let bad = Fixtures.sample("bad/not-an-image.jpg")
        let json = try CLI.run(["process", bad, "--store", store, "--log-format", "json"])
        #expect(json.status == 1)
        let lines = json.stderr.split(separator: "\n")
        #expect(lines.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(object["snap.code"] as? String == "unsupported")
        #expect(object["snap.file"] as? String == bad)
        #expect(object["level"] as? String == "warning")

        let text = try CLI.run(["process", bad, "--store", store])
        #expect(text.stderr.hasPrefix("\(bad): unsupported: "))
        let env = try CLI.run(["process", bad, "--store", store], environment: ["SNAPTHUMB_LOG_FORMAT": "json"])
        #expect(env.stderr.hasPrefix("{\"ts\":"))
        let wrong = try CLI.run(["process", bad, "--store", store, "--log-format", "xml"])
        #expect(wrong.status == 2)
        #expect(wrong.stderr.contains("--log-format must be text or json (got 'xml')"))
    }

    @Test("backfill and verify: JSON lines for failures, progress and the summary; -q keeps only failures")
    func backfillJSON() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let result = try CLI.run(["backfill", Fixtures.sample("bad"), "--store", store, "--log-format", "json", "--progress-interval", "0.01"])
        #expect(result.status == 1)
        var messages: [String] = []
        for line in result.stderr.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            #expect(object["ts"] is String && object["level"] is String)
            messages.append(object["msg"] as? String ?? "")
        }
        #expect(messages.contains("failed") && messages.last == "backfill finished")

        let quiet = try CLI.run(["backfill", Fixtures.sample("bad"), "--store", store, "-q"])
        #expect(quiet.status == 1)
        #expect(!quiet.stderr.contains("backfill:") && !quiet.stderr.contains("progress"))
        #expect(quiet.stderr.contains(": corrupt: "))

        let verify = try CLI.run(["verify", store, "--log-format", "json"])
        #expect(verify.status == 0)
        #expect(verify.stderr.contains("\"msg\":\"verify finished\""))
    }
}
