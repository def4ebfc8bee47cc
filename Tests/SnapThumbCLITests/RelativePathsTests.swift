import Foundation
import SystemKit
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
        let process = try SpawnedProcess(CLI.binary, ["process", "a", "--store", "s"], directory: work, stdout: .null, stderr: .null)
        #expect(process.wait() == SpawnedProcess.Ending(code: 0, signaled: false))
        #expect(FileManager.default.fileExists(atPath: "\(work)/s/manifests/a.json"))
    }
}
