@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
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

    @Test("JSON: counts, measurements and switches are JSON numbers and booleans; text is unchanged; strings stay strings")
    func jsonNumbers() throws {
        let metadata: Logger.Metadata = ["snap.n": .number(23), "snap.seconds": .number(0.2345), "snap.ok": .flag(true),
                                         "snap.key": "2026", "snap.nan": .number(Double.nan)]
        let line = SnapLogHandler.line(format: .json, date: Date(timeIntervalSince1970: 0), level: .info, label: "l", message: "m", metadata: metadata)
        #expect(line.hasSuffix(#""snap.key":"2026","snap.n":23,"snap.nan":null,"snap.ok":true,"snap.seconds":0.2}"#), "\(line)")
        let text = SnapLogHandler.line(format: .text, date: Date(timeIntervalSince1970: 0), level: .info, label: "l", message: "m", metadata: metadata)
        #expect(text.hasSuffix("snap.key=2026 snap.n=23 snap.nan=nan snap.ok=true snap.seconds=0.2"), "\(text)")
    }

    /// Every field of every JSON line whose value is a string that reads as a number or a boolean.
    static func numbersAsStrings(_ stderr: String) throws -> [String] {
        var found: [String] = []
        for line in stderr.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not JSON: \(line)")
            func visit(_ key: String, _ value: Any) {
                if let text = value as? String, Double(text) != nil || text == "true" || text == "false" { found.append("\(key)=\(text) in \(line)") }
                if let nested = value as? [String: Any] { for (k, v) in nested { visit("\(key).\(k)", v) } }
            }
            for (key, value) in object { visit(key, value) }
        }
        return found
    }

    @Test("no JSON log value of backfill, process, verify or gc is a number written as a string")
    func noNumbersAsStrings() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let input = Fixtures.tempDirectory("snapthumb-in")
        defer { Fixtures.remove(input) }
        for name in ["phone-portrait.jpg", "tiny.png"] { try FileManager.default.copyItem(atPath: Fixtures.sample("snaps/\(name)"), toPath: "\(input)/\(name)") }
        try FileManager.default.copyItem(atPath: Fixtures.sample("bad/truncated.jpg"), toPath: "\(input)/broken.jpg")
        let backfill = try CLI.run(["backfill", input, "--store", store, "--log-format", "json", "--progress-interval", "0.01", "--jobs", "1"])
        #expect(backfill.status == 1)
        #expect(try Self.numbersAsStrings(backfill.stderr) == [])
        let summary = try #require(backfill.stderr.split(separator: "\n").last.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        #expect(summary["snap.processed"] as? Int == 2 && summary["snap.interrupted"] as? Bool == false && summary["snap.seconds"] is Double)
        #expect((summary["snap.failed_by_code"] as? [String: Int]) == ["corrupt": 1])
        for arguments in [["verify", store], ["gc", store, "--dry-run"], ["process", Fixtures.sample("snaps/tiny.png"), "--store", store]] {
            let result = try CLI.run(arguments + ["--log-format", "json", "--log-level", "debug"])
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(try Self.numbersAsStrings(result.stderr) == [], "\(arguments)")
        }
    }

    @Test("config --json: numbers, booleans and null as JSON types; durations and names as strings")
    func configJSON() throws {
        let result = try CLI.run(["config", "--json", "--budget", "none", "--jobs", "3"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: [String: Any]])
        func value(_ name: String) -> Any? { object[name]?["value"] }
        #expect(value("pipeline.square.qualityMax") as? Int == 100)
        #expect(value("pipeline.pixel.dither") as? Bool == false)
        #expect(value("pipeline.square.budget") is NSNull)
        #expect(value("pipeline.pixel.budget") as? Int == 4096)
        #expect(value("pipeline.square.chroma") as? String == "444")
        #expect(value("backfill.jobs") as? Int == 3)
        #expect(value("watch.drainTimeout") as? String == "25s")
        #expect(value("watch.poll") as? Bool == false)
        #expect(object["backfill.jobs"]?["source"] as? String == "--jobs")
        let text = try CLI.run(["config", "--budget", "none"])
        #expect(text.stdout.contains("pipeline.square.budget") && text.stdout.contains("none"))
    }
}
