import Foundation
import Testing

/// Every ```sh block of README.md runs against the built binary (Scripts/check-readme.sh), so the
/// page a newcomer reads first cannot go stale.
@Suite("README", .serialized)
struct ReadmeTests {
    @Test("every command in README.md runs (or says what runs it instead)")
    func commandsRun() throws {
        let binDirectory = URL(fileURLWithPath: CLI.binary).deletingLastPathComponent().path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [Fixtures.root + "/Scripts/check-readme.sh", binDirectory]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(output)")
        #expect(output.contains(" ok"), "at least one block ran: \(output)")
        for line in output.split(separator: "\n") where line.contains("skipped") {
            #expect(line.contains("skipped: ") && line.count > "check-readme: block-00 skipped: ".count + 10, "a skip says why: \(line)")
        }
    }
}
