import Foundation
import Testing
import SnapThumbTesting

/// Issue 40: `get` names what went wrong with a permanent code, never `io` (a transient write
/// failure, per the README's table).
@Suite("get's failure codes")
struct GetCodesTests {
    @Test("no such key or variant: unreadable; a blob the manifest names gone: corrupt; exit 1 each")
    func codes() throws {
        let root = Fixtures.tempDirectory("snapthumb-get-codes")
        defer { Fixtures.remove(root) }
        let processed = try CLI.run(["process", Fixtures.sample("snaps/phone-portrait.jpg"), "--store", root])
        #expect(processed.status == 0, "\(processed.stderr)")
        let missing = try CLI.run(["get", root, "nope.jpg", "--output", root + "/out.jpg"])
        #expect(missing.status == 1 && missing.stderr.hasPrefix("nope.jpg: unreadable: no manifest for key \"nope.jpg\""), "\(missing.stderr)")
        let variant = try CLI.run(["get", root, "phone-portrait.jpg", "--variant", "square100-heic", "--output", root + "/out.heic"])
        #expect(variant.status == 1 && variant.stderr.contains(": unreadable: \"phone-portrait.jpg\" has no variant square100-heic"), "\(variant.stderr)")
        // The square's blob removed behind the manifest's back.
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: root + "/manifests/phone-portrait.jpg.json"))) as? [String: Any])
        let path = try #require(((manifest["variants"] as? [String: Any])?["square100"] as? [String: Any])?["path"] as? String)
        try FileManager.default.removeItem(atPath: root + "/" + path)
        let gone = try CLI.run(["get", root, "phone-portrait.jpg", "--output", root + "/out.jpg"])
        #expect(gone.status == 1 && gone.stderr.contains(": corrupt: the blob of variant square100 of \"phone-portrait.jpg\" is missing"), "\(gone.stderr)")
        #expect(!(missing.stderr + variant.stderr + gone.stderr).contains(": io: "))
        #expect(!FileManager.default.fileExists(atPath: root + "/out.jpg"))
    }
}
