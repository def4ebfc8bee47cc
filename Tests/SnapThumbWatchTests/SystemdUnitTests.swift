import Foundation
import Testing

/// The shipped systemd unit (dist/systemd/snapthumb-watch@.service) and its install script.
@Suite("systemd unit", .serialized)
struct SystemdUnitTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static var unit: String { root + "/dist/systemd/snapthumb-watch@.service" }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test("a template unit of Type=notify with a watchdog, credentials by EnvironmentFile=")
    func contents() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=60", "KillSignal=SIGTERM", "TimeoutStopSec=35",
                     "Restart=always", "EnvironmentFile=-/etc/snapthumb/snapthumb.env", "User=snapthumb", "NoNewPrivileges=yes"] {
            #expect(lines.contains(line), "\(line)")
        }
        #expect(text.contains("ExecStart=/usr/local/bin/snapthumb watch "))
        #expect(text.contains("%i"), "a template: one instance per worker")
    }

    @Test("systemd-analyze security --offline=true rates it 3.0 or lower")
    func exposure() throws {
        let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let analyze else {
            Issue.record("systemd-analyze is not installed: run Scripts/setup.sh (Debian package systemd)")
            return
        }
        let result = try Self.run(analyze, ["security", "--offline=true", Self.unit])
        let line = result.output.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let score = line.flatMap { $0.split(separator: ":").last?.split(separator: " ").first }.flatMap { Double($0) }
        #expect(score != nil, "\(result.output)")
        #expect((score ?? 99) <= 3.0, "\(line ?? "")")
    }

    @Test("Scripts/install.sh installs the binary, the schema, the unit and a config into a staging directory")
    func install() throws {
        let staging = FileManager.default.temporaryDirectory.appendingPathComponent("snapthumb-install-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let result = try Self.run("/bin/bash", [Self.root + "/Scripts/install.sh", "--binary", WatchHarness.binary, "--destdir", staging])
        #expect(result.status == 0, "\(result.output)")
        for path in ["/usr/local/bin/snapthumb", "/usr/local/share/snapthumb/manifest.v1.schema.json",
                     "/etc/systemd/system/snapthumb-watch@.service", "/etc/snapthumb/snapthumb.json"] {
            #expect(FileManager.default.fileExists(atPath: staging + path), "\(path)")
        }
        let config = try Self.run(staging + "/usr/local/bin/snapthumb", ["config", "--config", staging + "/etc/snapthumb/snapthumb.json"])
        #expect(config.status == 0, "the shipped config file parses: \(config.output)")
    }
}
