#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import SnapThumbTesting
import Testing
import SnapThumbCore

/// The watch metrics textfile as Prometheus tooling sees it.
@Suite("Metrics format", .serialized)
struct MetricsFormatTests {
    /// The exposition-format rules `promtool check metrics` enforces that matter here, so that
    /// the test says which one broke: HELP and TYPE for every family, counters end in `_total`,
    /// no other family does, and no non-base units (milliseconds, kilobytes…) in names.
    static func lint(_ text: String) -> [String] {
        var help = Set<String>(), type: [String: String] = [:], samples = Set<String>()
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 3).map(String.init)
            if parts.first == "#", parts.count >= 3 {
                if parts[1] == "HELP" { help.insert(parts[2]) }
                if parts[1] == "TYPE", parts.count == 4 { type[parts[2]] = parts[3] }
            } else if let name = parts.first?.split(separator: "{").first {
                samples.insert(String(name))
            }
        }
        var problems: [String] = []
        for sample in samples.sorted() {
            let family = type[sample] != nil ? sample : ["_bucket", "_sum", "_count"].lazy.compactMap { suffix -> String? in
                guard sample.hasSuffix(suffix) else { return nil }
                let base = String(sample.dropLast(suffix.count))
                return type[base] == "histogram" || type[base] == "summary" ? base : nil
            }.first
            guard let family else { problems.append("\(sample): no TYPE"); continue }
            if !help.contains(family) { problems.append("\(family): no HELP") }
        }
        for (family, kind) in type {
            if kind == "counter", !family.hasSuffix("_total") { problems.append("\(family): counter without _total") }
            if kind != "counter", family.hasSuffix("_total") { problems.append("\(family): \(kind) ending in _total") }
            for unit in ["milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "kilobytes", "megabytes", "_ms", "_kb", "_mb"]
            where family.contains(unit) {
                problems.append("\(family): not in base units (\(unit))")
            }
        }
        return problems.sorted()
    }

    @Test("the rule check catches what promtool would")
    func lintCatches() {
        #expect(Self.lint("# HELP a_total x\n# TYPE a_total counter\na_total 1\n") == [])
        #expect(Self.lint("# TYPE a_total counter\na_total 1\n") == ["a_total: no HELP"])
        #expect(Self.lint("# HELP a x\n# TYPE a counter\na 1\n") == ["a: counter without _total"])
        #expect(Self.lint("# HELP t_milliseconds x\n# TYPE t_milliseconds gauge\nt_milliseconds 1\n") == ["t_milliseconds: not in base units (milliseconds)"])
    }

    @Test("the metrics file passes promtool check metrics, with build_info and a heartbeat timestamp")
    func promtool() throws {
        let h = try WatchHarness()
        let metrics = h.root + "/snapthumb.prom"
        let before = Date().timeIntervalSince1970
        let worker = try h.start(["--metrics-file", metrics, "--metrics-interval", "500ms"])
        try h.drop("ok.jpg", try TestImages.jpeg(1))
        try h.drop("bad.jpg", Array("nope".utf8))
        eventually("metrics written after both uploads") {
            let text = (try? String(contentsOfFile: metrics, encoding: .utf8)) ?? ""
            return text.contains("snapthumb_watch_files_processed_total 1") && text.contains("snapthumb_watch_files_failed_total{code=\"unsupported\"} 1")
        }
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(Self.lint(text) == [], "\(text)")
        #expect(text.contains("snapthumb_build_info{version=\"\(SnapThumbVersion.current)\""), "\(text)")
        let heartbeat = text.split(separator: "\n").first { $0.hasPrefix("snapthumb_watch_last_heartbeat_timestamp_seconds ") }
        let seconds = heartbeat.flatMap { Double($0.split(separator: " ")[1]) }
        #expect(seconds.map { $0 >= before.rounded(.down) } == true, "heartbeat: \(String(describing: heartbeat))")
        for family in ["snapthumb_watch_files_processed_total", "snapthumb_watch_processing_seconds", "snapthumb_build_info",
                       "snapthumb_watch_last_heartbeat_timestamp_seconds"] {
            #expect(text.contains("# HELP \(family) "), "\(family) has HELP")
        }

        // promtool itself (Scripts/setup.sh installs Debian's prometheus package, which ships it).
        let promtool = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let promtool else {
            Issue.record("promtool is not installed: run Scripts/setup.sh (Debian package prometheus)")
            return
        }
        let input = try #require(FileHandle(forReadingAtPath: metrics))
        defer { try? input.close() }
        let (status, output) = try ChildProcess.combined(promtool, ["check", "metrics"], stdin: .descriptor(input.fileDescriptor))
        #expect(status == 0, "promtool check metrics: \(output)")
        #expect(output.isEmpty, "promtool found nothing to say: \(output)")
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 60) == 0)
    }
}
