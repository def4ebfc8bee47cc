import Foundation
import Testing
@_spi(Testing) import SnapThumbTesting

/// Paths as a shell user gives them: relative to the current directory, however short.
@Suite("relative paths")
struct RelativePathsTests {
    @Test("a store and an input with one-character relative names work from the current directory")
    func oneCharacterNames() throws {
        let work = Fixtures.tempDirectory("snapthumb-onechar")
        defer { Fixtures.remove(work) }
        try FileManager.default.copyItem(atPath: Fixtures.sample("snaps/tiny.png"), toPath: "\(work)/a")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = ["process", "a", "--store", "s"]
        process.currentDirectoryURL = URL(fileURLWithPath: work)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        #expect(FileManager.default.fileExists(atPath: "\(work)/s/manifests/a.json"))
    }
}
