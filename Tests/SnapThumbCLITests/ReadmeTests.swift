@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing

/// Every ```sh block of README.md runs against the built binary (Scripts/check-readme.sh), so the
/// page a newcomer reads first cannot go stale.
@Suite("README", .serialized)
struct ReadmeTests {
    @Test("every command in README.md runs (or says what runs it instead)")
    func commandsRun() throws {
        let binDirectory = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().path
        let (status, output) = try ChildProcess.combined("/bin/bash", [Fixtures.root + "/Scripts/check-readme.sh", binDirectory])
        #expect(status == 0, "\(output)")
        #expect(output.contains(" ok"), "at least one block ran: \(output)")
        for line in output.split(separator: "\n") where line.contains("skipped") {
            #expect(line.contains("skipped: ") && line.count > "check-readme: block-00 skipped: ".count + 10, "a skip says why: \(line)")
        }
    }

    @Test("README.md stays short (250 lines or fewer; the detail lives in docs/)")
    func length() throws {
        let text = try String(contentsOfFile: Fixtures.root + "/README.md", encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).count - (text.hasSuffix("\n") ? 1 : 0)
        #expect(lines <= 250, "README.md has \(lines) lines")
    }

    @Test("docs/commands.md's full config example is a config file snapthumb accepts, with the defaults it documents")
    func configurationDetails() throws {
        let text = try String(contentsOfFile: Fixtures.root + "/docs/commands.md", encoding: .utf8)
        let section = try #require(text.range(of: "## Configuration details").map { text[$0.upperBound...] })
        let start = try #require(section.range(of: "```json\n")), end = try #require(section[start.upperBound...].range(of: "```"))
        let path = NSTemporaryDirectory() + "snapthumb-docs-config-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try String(section[start.upperBound ..< end.lowerBound]).write(toFile: path, atomically: true, encoding: .utf8)
        let result = try CLI.run(["config", "--config", path, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let defaults = try CLI.run(["config", "--json"])
        let documented = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: [String: Any]])
        let actual = try #require(try JSONSerialization.jsonObject(with: Data(defaults.stdout.utf8)) as? [String: [String: Any]])
        for (name, row) in documented where name.hasPrefix("pipeline.") {
            #expect("\(row["value"] ?? "")" == "\(actual[name]?["value"] ?? "")", "\(name): the docs say \(row["value"] ?? ""), the default is \(actual[name]?["value"] ?? "")")
        }
    }
}
