@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import SnapThumbVerify

/// Regressions from issue 23's attack run: names that a Character split
/// misreads, a symlink planted in the store, a secret typed into a store URL.
@Suite("Attack-run regressions", .serialized)
struct AttackRunTests {
    /// "\u{301}a.jpg": a file name that starts with a combining mark, so that the
    /// '/' before it and the mark are one Swift Character.
    static let combining = "\u{301}a.jpg"

    @Test("paths and keys are split by bytes, never by Character")
    func pathBytes() {
        #expect(Paths.parent(of: "S/manifests/\(Self.combining).json") == "S/manifests")
        #expect(Paths.parent(of: "/\u{301}") == "/")
        #expect(PathBytes.segments("in/\u{301}a.jpg") == ["in", "\u{301}a.jpg"])
        #expect(PathBytes.isHidden(".\u{301}x"))
        #expect(PathBytes.pathExtension("a.j\u{301}pg") == "j\u{301}pg")
        // One Character of 201 scalars: a prefix by Characters would keep all of it.
        let long = "a" + String(repeating: "\u{301}", count: 200)
        #expect(PathBytes.prefix(long, maxBytes: 40).utf8.count <= 40)
        #expect(TempFiles.parse(".tmp-12-3-\u{301}a.jpg.json")?.pid == 12)
        #expect(TempFiles.parse(".tmp-12-3-\u{301}a.jpg.json")?.name == "\u{301}a.jpg.json")
    }

    @Test("a key whose '..' is hidden in front of a combining mark is refused")
    func hiddenDotDot() {
        for key in ["../\u{301}x.jpg", "a/../\u{301}b.jpg", "/\u{301}x.jpg", "a//\u{301}b"] {
            #expect(throws: SnapError.self, "\(key)") { try StoreKey.validate(key) }
        }
        #expect(throws: Never.self) { try StoreKey.validate("in/\u{301}a.jpg") }
    }

    @Test("process publishes a file whose name starts with a combining mark")
    func combiningMarkFile() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        try FileManager.default.createDirectory(atPath: "\(dir)/in", withIntermediateDirectories: true)
        let file = "\(dir)/in/\(Self.combining)"
        try Data(try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))).write(to: URL(fileURLWithPath: file))
        let result = try CLI.run(["process", file, "--store", "\(dir)/store"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(dir)/store/manifests/\(Self.combining).json"))
        let backfill = try CLI.run(["backfill", "\(dir)/in", "--store", "\(dir)/store2", "--jobs", "1"])
        #expect(backfill.status == 0, "\(backfill.stderr)")
        #expect(try StoreVerifier.verify(root: "\(dir)/store2").isClean)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/store2/manifests/\(Self.combining).json"))
    }

    @Test("a symlink planted inside the store is refused, never followed", arguments: ["manifests/evil", "blobs"])
    func plantedSymlink(_ planted: String) throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let elsewhere = "\(dir)/elsewhere", store = "\(dir)/store", tree = "\(dir)/tree"
        for path in [elsewhere, "\(store)/manifests", "\(tree)/evil"] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        try FileManager.default.createSymbolicLink(atPath: "\(store)/\(planted)", withDestinationPath: elsewhere)
        try Data(try Fixtures.bytes(Fixtures.sample("snaps/grey.jpg"))).write(to: URL(fileURLWithPath: "\(tree)/evil/a.jpg"))
        let result = try CLI.run(["backfill", tree, "--store", store, "--jobs", "1"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("symbolic link inside the store"), "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere) == [], "nothing written outside the store")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: "\(store)/\(planted)") == elsewhere, "the link itself is not ours to remove")
    }

    @Test("a secret in a store or source URL never appears in the output")
    func secretInURL() throws {
        let secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let runs: [[String]] = [
            ["process", Fixtures.sample("snaps/grey.jpg"), "--store", "s3://AKIAIOSFODNN7EXAMPLE:\(secret)@thumbs/x"],
            ["backfill", "s3://AKIAIOSFODNN7EXAMPLE:\(secret)@uploads/x", "--store", dir],
            ["verify", "s3://key:\(secret)@thumbs/x"],
            ["process", Fixtures.sample("snaps/grey.jpg"), "--store", "https://user:\(secret)@example.com/x"],
        ]
        for arguments in runs {
            let result = try CLI.run(arguments)
            #expect(result.status == 2, "\(arguments[0]): \(result.status)")
            #expect(!(result.stdout + result.stderr).contains(secret), "\(arguments[0]) echoed the secret: \(result.stderr)")
            #expect(!(result.stdout + result.stderr).contains("AKIAIOSFODNN7EXAMPLE"))
        }
        #expect(RedactedURL.text("s3://a:b@bucket/p?x=y@z") == "s3://***@bucket/p?x=y@z")
        #expect(RedactedURL.text("s3://bucket/p@q") == "s3://bucket/p@q")
    }
}
