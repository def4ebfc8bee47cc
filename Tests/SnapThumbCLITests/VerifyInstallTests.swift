@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing

@testable import SnapThumbCore

/// The manifest schema is a package resource, not a copy inside the binary: an installed
/// binary finds it beside itself or under <prefix>/share/snapthumb, and says so when it cannot.
@Suite("verify finds its schema where it is installed")
struct VerifyInstallTests {
    @Test("a binary copied without its resource fails verify with a sentence; with share/snapthumb it verifies")
    func schemaResourceLookup() throws {
        let work = Fixtures.tempDirectory("snapthumb-install")
        defer { Fixtures.remove(work) }
        let store = "\(work)/store", prefix = "\(work)/prefix"
        let made = try CLI.run(["process", Fixtures.sample("snaps/tiny.png"), "--store", store])
        #expect(made.status == 0, "\(made.stderr)")

        let fm = FileManager.default
        try fm.createDirectory(atPath: "\(prefix)/bin", withIntermediateDirectories: true)
        let installed = "\(prefix)/bin/snapthumb"
        try fm.copyItem(atPath: CLI.binary, toPath: installed)

        let missing = try CLI.run(["verify", store], binary: installed)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("manifest schema"), "\(missing.stderr)")
        #expect(missing.stderr.contains("\(prefix)/share/snapthumb"), "the message names where it looked: \(missing.stderr)")

        try fm.createDirectory(atPath: "\(prefix)/share/snapthumb", withIntermediateDirectories: true)
        try fm.copyItem(atPath: URL(fileURLWithPath: "\(Fixtures.root)/docs/manifest.v1.schema.json").resolvingSymlinksInPath().path,
                        toPath: "\(prefix)/share/snapthumb/manifest.v1.schema.json")
        let found = try CLI.run(["verify", store], binary: installed)
        #expect(found.status == 0, "\(found.stderr)")
        #expect(found.stderr.contains("1 manifests: ok"), "\(found.stderr)")

        // Found on PATH by a shell (argv[0] is then just "snapthumb"), as after an install or in a container.
        let (status, text) = try ChildProcess.combined("/bin/sh", ["-c", "exec snapthumb verify \"$0\"", store],
                                                        environment: ["PATH": "\(prefix)/bin:/usr/bin:/bin"], directory: work)
        #expect(status == 0, "\(text)")
        #expect(text.contains("1 manifests: ok"), "\(text)")
    }
}
