import Foundation
import Testing
import SnapThumbTesting

/// The shipped consume unit (dist/systemd/snapthumb-consume@.service), checked as the watch
/// unit is (SystemdUnitTests), and the man page install.sh makes.
@Suite("systemd consume unit", .serialized)
struct ConsumeUnitTests {
    static var unit: String { Fixtures.root + "/dist/systemd/snapthumb-consume@.service" }
    static var analyze: String? { ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) } }

    @Test("a template unit of Type=notify with a watchdog, the queue from an EnvironmentFile, the metrics path optional, hardened as the watch unit")
    func contents() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=60", "KillSignal=SIGTERM", "TimeoutStopSec=35", "Restart=always",
                     "EnvironmentFile=-/etc/snapthumb/consume.env", "User=snapthumb", "NoNewPrivileges=yes",
                     "ReadWritePaths=-/srv/snapthumb -/var/lib/node_exporter/textfile"] {
            #expect(lines.contains(line), "\(line)")
        }
        #expect(text.contains("ExecStart=/usr/local/bin/snapthumb consume ${QUEUE_URL} --worker-id %H.%i"))
        // Every hardening directive of the watch unit is here too, with the same value.
        let watch = try String(contentsOfFile: Fixtures.root + "/dist/systemd/snapthumb-watch@.service", encoding: .utf8)
        let hardening = watch.components(separatedBy: "# Hardening")[1].components(separatedBy: "[Install]")[0]
            .split(separator: "\n").map(String.init).filter { $0.wholeMatch(of: /[A-Z][A-Za-z]+=.*/) != nil && !$0.hasPrefix("ReadWritePaths=") }
        #expect(hardening.count > 25)
        for line in hardening { #expect(lines.contains(line), "\(line) (as in the watch unit)") }
        // The drain fits in the stop timeout.
        #expect(text.contains("(25 s)") && lines.contains("TimeoutStopSec=35"))
    }

    @Test("systemd-analyze security --offline=true rates it 3.0 or lower")
    func exposure() throws {
        guard let analyze = Self.analyze else {
            Issue.record("systemd-analyze is not installed: run Scripts/setup.sh (Debian package systemd)")
            return
        }
        let result = try SystemdUnitTests.run(analyze, ["security", "--offline=true", Self.unit])
        let line = result.output.split(separator: "\n").first { $0.contains("Overall exposure level") }
        let score = line.flatMap { $0.split(separator: ":").last?.split(separator: " ").first }.flatMap { Double($0) }
        #expect(score != nil, "\(result.output)")
        #expect((score ?? 99) <= 3.0, "\(line ?? "")")
    }

    @Test("systemd-analyze verify finds nothing to say about an instance of it")
    func analyzeVerify() throws {
        guard let analyze = Self.analyze else {
            Issue.record("systemd-analyze is not installed: run Scripts/setup.sh (Debian package systemd)")
            return
        }
        let directory = Fixtures.tempDirectory("snapthumb-consume-unit")
        defer { Fixtures.remove(directory) }
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8).replacingOccurrences(of: "/usr/local/bin/snapthumb", with: WatchHarness.binary)
        try text.write(toFile: directory + "/snapthumb-consume@1.service", atomically: true, encoding: .utf8)
        let result = try SystemdUnitTests.run(analyze, ["verify", "--man=no", directory + "/snapthumb-consume@1.service"])
        let complaints = result.output.split(separator: "\n").filter { $0.contains("snapthumb-consume@") }
        #expect(result.status == 0 && complaints.isEmpty, "\(result.output)")
    }

    @Test("the unit's command line runs: the arguments parse, the queue comes from QUEUE_URL, and a queue that cannot be reached is a start-up failure (exit 2)")
    func commandLine() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let exec = try #require(text.components(separatedBy: "ExecStart=").last?.components(separatedBy: "\nEnvironment=").first)
        let words = exec.replacingOccurrences(of: "\\\n", with: " ").split(separator: " ").map(String.init)
        let metrics = Fixtures.tempDirectory("snapthumb-consume-unit-metrics")
        defer { Fixtures.remove(metrics) }
        let arguments = words.dropFirst().map {
            $0.replacingOccurrences(of: "${QUEUE_URL}", with: "http://127.0.0.1:9/123456789012/snaps")
                .replacingOccurrences(of: "%H", with: "host").replacingOccurrences(of: "%i", with: "1")
                .replacingOccurrences(of: "/var/lib/node_exporter/textfile", with: metrics)
        }
        #expect(words.first == "/usr/local/bin/snapthumb" && arguments.first == "consume", "\(words)")
        let result = try CLI.run(arguments, environment: ["SNAPTHUMB_SOURCE": "s3://uploads/snaps/", "SNAPTHUMB_STORE": metrics + "/store",
                                                          "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_REGION": "eu-west-1",
                                                          "AWS_MAX_ATTEMPTS": "1"])
        #expect(result.status == 2 && result.stderr.contains("consume: the queue: "), "\(result.stderr)")
    }
}
