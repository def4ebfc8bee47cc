@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting

/// The shipped systemd unit (dist/systemd/snapthumb-watch@.service) and its install script.
@Suite("systemd unit", .serialized)
struct SystemdUnitTests {
    static let root = Fixtures.root
    static var unit: String { root + "/dist/systemd/snapthumb-watch@.service" }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try ChildProcess.combined(executable, arguments)
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

    @Test("issue 28: the unit starts without node_exporter's directory, documents itself, and keeps no stale directive")
    func optionalPaths() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let readWrite = text.split(separator: "\n").filter { $0.hasPrefix("ReadWritePaths=") }
        #expect(readWrite == ["ReadWritePaths=/srv/snapthumb -/var/lib/node_exporter/textfile"])
        #expect(!text.contains("RestartForceExitStatus"), "watch never exits 70")
        let documentation = text.split(separator: "\n").first { $0.hasPrefix("Documentation=") }.map { $0.dropFirst("Documentation=".count).split(separator: " ") }
        #expect(documentation == ["man:snapthumb(1)", "file:///usr/local/share/doc/snapthumb/watch.md"], "both installed by Scripts/install.sh (see install())")
    }

    @Test("systemd-analyze verify finds nothing to say about the unit")
    func analyzeVerify() throws {
        let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let analyze else {
            Issue.record("systemd-analyze is not installed: run Scripts/setup.sh (Debian package systemd)")
            return
        }
        // An instance of the template, with the binary it names present (verify checks ExecStart's path).
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapthumb-unit-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/snapthumb", with: WatchHarness.binary)
        try text.write(toFile: directory + "/snapthumb-watch@1.service", atomically: true, encoding: .utf8)
        let result = try Self.run(analyze, ["verify", "--man=no", directory + "/snapthumb-watch@1.service"])
        let complaints = result.output.split(separator: "\n").filter { $0.contains("snapthumb-watch@") }
        #expect(result.status == 0 && complaints.isEmpty, "\(result.output)")
    }

    @Test("Scripts/install.sh installs the binary, man page, completions, docs, schema, unit and a config into a staging directory")
    func install() throws {
        let manualTool = (WatchHarness.binary as NSString).deletingLastPathComponent + "/generate-manual"
        guard FileManager.default.isExecutableFile(atPath: manualTool) else {
            Issue.record("\(manualTool) is missing: run 'swift build --product generate-manual' first (Scripts/test.sh does); swift test holds the build directory, so install.sh cannot build it now")
            return
        }
        let staging = FileManager.default.temporaryDirectory.appendingPathComponent("snapthumb-install-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: staging) }
        let result = try Self.run("/bin/bash", [Self.root + "/Scripts/install.sh", "--binary", WatchHarness.binary, "--destdir", staging])
        #expect(result.status == 0, "\(result.output)")
        for path in ["/usr/local/bin/snapthumb", "/usr/local/lib/snapthumb/libSnapThumbFaces.so", "/usr/local/share/snapthumb/manifest.v1.schema.json",
                     "/etc/systemd/system/snapthumb-watch@.service", "/etc/systemd/system/snapthumb-consume@.service", "/etc/snapthumb/snapthumb.json",
                     "/usr/local/share/doc/snapthumb/watch.md", "/usr/local/share/doc/snapthumb/README.md"] {
            #expect(FileManager.default.fileExists(atPath: staging + path), "\(path)")
        }
        // The man page is the CLI's own help: every subcommand and a flag of each of the new ones.
        let manual = try String(contentsOfFile: staging + "/usr/local/share/man/man1/snapthumb.1", encoding: .utf8)
        #expect(manual.contains(".Dt SNAPTHUMB 1"))
        for word in ["Em process", "Em backfill", "Em verify", "Em watch", "Em ls", "Em get", "Em gc", "-grace", "-dry-run", "-variant"] {
            #expect(manual.contains(word), "\(word)")
        }
        // Issue 40: every character outside ASCII as a roff escape, so that man shows "100×100", not "100100".
        #expect(manual.utf8.allSatisfy { $0 < 0x80 }, "raw UTF-8 in the man page")
        #expect(manual.contains("\\[u00D7]"), "the × of 100×100")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/man") {
            let shown = try Self.run("/usr/bin/env", ["LC_ALL=C.UTF-8", "MANWIDTH=200", "/usr/bin/man", "-l", staging + "/usr/local/share/man/man1/snapthumb.1"])
            #expect(shown.output.contains("100×100"), "\(shown.output.prefix(2000))")
        }
        // Completions complete values, not only flag names.
        let bash = try String(contentsOfFile: staging + "/usr/local/share/bash-completion/completions/snapthumb", encoding: .utf8)
        for value in ["pico8", "attention", "inline", "json", "warning", "pixel100"] { #expect(bash.contains(value), "\(value)") }
        #expect(FileManager.default.fileExists(atPath: staging + "/usr/local/share/zsh/site-functions/_snapthumb"))
        #expect(FileManager.default.fileExists(atPath: staging + "/usr/local/share/fish/vendor_completions.d/snapthumb.fish"))
        let config = try Self.run(staging + "/usr/local/bin/snapthumb", ["config", "--config", staging + "/etc/snapthumb/snapthumb.json"])
        #expect(config.status == 0, "the shipped config file parses: \(config.output)")
    }
}
