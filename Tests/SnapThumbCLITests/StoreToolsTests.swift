@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit

/// Issue 28: `ls`, `get` and `gc` on a directory store, and the usage errors of commands that read a store.
@Suite("Store tools", .serialized)
struct StoreToolsTests {
    /// A store with two uploads and one orphan blob written `age` seconds ago.
    static func store(orphanAge: Double = 3 * 86_400) throws -> (root: String, orphan: String) {
        let root = Fixtures.tempDirectory("snapthumb-tools")
        let result = try CLI.run(["process", Fixtures.sample("snaps/phone-portrait.jpg"), Fixtures.sample("snaps/tiny.png"), "--store", root])
        #expect(result.status == 0, "\(result.stderr)")
        let orphan = try writeBlob(Array("bytes no manifest names".utf8), root: root, age: orphanAge)
        return (root, orphan)
    }

    /// Writes a blob under its content address and dates it `age` seconds back.
    static func writeBlob(_ bytes: [UInt8], root: String, age: Double) throws -> String {
        let hex = SHA256.hex(bytes)
        let path = "\(root)/blobs/sha256/\(hex.prefix(2))/\(hex)"
        try FileManager.default.createDirectory(atPath: Paths.parent(of: path), withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -age)], ofItemAtPath: path)
        return path
    }

    static func manifest(_ root: String, _ key: String) throws -> Manifest {
        try Manifest.decode(Data(contentsOf: URL(fileURLWithPath: "\(root)/manifests/\(key).json")))
    }

    static func blobPaths(_ root: String) throws -> Set<String> {
        Set(try FileManager.default.subpathsOfDirectory(atPath: "\(root)/blobs/sha256").filter { $0.count == 67 })
    }

    /// Runs the binary and returns its stdout byte for byte.
    static func rawStdout(_ arguments: [String]) throws -> (status: Int32, bytes: [UInt8]) {
        let process = try SpawnedProcess(CLI.binary, arguments, stdout: .pipe, stderr: .null)
        let data = process.output!.readDataToEndOfFile()
        return (process.wait().code, [UInt8](data))
    }

    @Test("ls: one line per key with the square's bytes and the manifest's time; --json one summary per line; a prefix filters")
    func ls() throws {
        let (root, _) = try Self.store()
        defer { Fixtures.remove(root) }
        let result = try CLI.run(["ls", root])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(lines.map { $0[0] } == ["phone-portrait.jpg", "tiny.png"])
        for line in lines {
            #expect(line.count == 3)
            #expect(Int(line[1]) == (try Self.manifest(root, line[0])).variants["square100"]?.bytes)
            #expect(line[2].wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(line[2])")
        }

        let json = try CLI.run(["ls", root, "--json"])
        #expect(json.status == 0)
        let objects = try json.stdout.split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.map { $0?["key"] as? String } == ["phone-portrait.jpg", "tiny.png"])
        let variants = objects.first??["variants"] as? [String: [String: Any]]
        #expect(Set(variants?.keys.map { $0 } ?? []) == ["square100", "pixel25", "pixel100"])
        #expect(variants?["square100"]?["bytes"] as? Int == (try Self.manifest(root, "phone-portrait.jpg")).variants["square100"]?.bytes)

        let filtered = try CLI.run(["ls", root, "tin"])
        #expect(filtered.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] } == ["tiny.png"])
    }

    @Test("get: exactly the square100 blob by default, another variant with --variant, the manifest with --manifest")
    func get() throws {
        let (root, _) = try Self.store()
        defer { Fixtures.remove(root) }
        let manifest = try Self.manifest(root, "phone-portrait.jpg")
        func blob(_ name: String) throws -> [UInt8] { try Fixtures.bytes("\(root)/\(manifest.variants[name]!.path)") }

        let square = try Self.rawStdout(["get", root, "phone-portrait.jpg"])
        #expect(square.status == 0)
        #expect(square.bytes == (try blob("square100")))
        let out = "\(root)/pixel100.png"
        let pixel = try CLI.run(["get", root, "phone-portrait.jpg", "--variant", "pixel100", "--output", out])
        #expect(pixel.status == 0, "\(pixel.stderr)")
        #expect(try Fixtures.bytes(out) == (try blob("pixel100")))
        let printed = try Self.rawStdout(["get", root, "phone-portrait.jpg", "--manifest"])
        #expect(printed.bytes == (try Fixtures.bytes("\(root)/manifests/phone-portrait.jpg.json")))

        let missing = try CLI.run(["get", root, "nope.jpg"])
        #expect(missing.status == 1 && missing.stderr.contains("no manifest for key \"nope.jpg\""), "\(missing.stderr)")
        let noVariant = try CLI.run(["get", root, "phone-portrait.jpg", "--variant", "square100-avif"])
        #expect(noVariant.status == 1 && noVariant.stderr.contains("has no variant square100-avif"), "\(noVariant.stderr)")
        let escape = try CLI.run(["get", root, "../etc/passwd"])
        #expect(escape.status == 2, "\(escape.stderr)")

        // A damaged blob is refused and nothing is written.
        let path = "\(root)/\(manifest.variants["pixel25"]!.path)"
        var bytes = try Fixtures.bytes(path)
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let damaged = try CLI.run(["get", root, "phone-portrait.jpg", "--variant", "pixel25", "--output", "\(root)/damaged.png"])
        #expect(damaged.status == 1 && damaged.stderr.contains("is damaged"), "\(damaged.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(root)/damaged.png"))
    }

    @Test("gc: --dry-run names the orphan and deletes nothing; --grace 0 deletes just the orphan; the store verifies")
    func gc() throws {
        let (root, orphan) = try Self.store()
        defer { Fixtures.remove(root) }
        let young = try Self.writeBlob(Array("an upload in flight".utf8), root: root, age: 60)
        let before = try Self.blobPaths(root)

        let dry = try CLI.run(["gc", root, "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout.split(separator: "\n").count == 1 && dry.stdout.hasPrefix("would delete \(orphan)"), "\(dry.stdout)")
        #expect(try Self.blobPaths(root) == before)

        // The default grace (24 h) spares the young orphan.
        let gc = try CLI.run(["gc", root])
        #expect(gc.status == 0, "\(gc.stderr)")
        #expect(gc.stdout.hasPrefix("deleted \(orphan)") && gc.stdout.split(separator: "\n").count == 1, "\(gc.stdout)")
        #expect(gc.stderr.contains("1 orphan(s) deleted") && gc.stderr.contains("1 orphan(s) younger than 1d kept"), "\(gc.stderr)")
        #expect(!FileManager.default.fileExists(atPath: orphan) && FileManager.default.fileExists(atPath: young))

        let all = try CLI.run(["gc", root, "--grace", "0"])
        #expect(all.status == 0 && all.stdout.hasPrefix("deleted \(young)"), "\(all.stdout)\(all.stderr)")
        #expect(try Self.blobPaths(root).count == before.count - 2, "every named blob stays")
        let manifests = try FileManager.default.subpathsOfDirectory(atPath: "\(root)/manifests")
        #expect(manifests.sorted() == ["phone-portrait.jpg.json", "tiny.png.json"])
        let verify = try CLI.run(["verify", root])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        for key in ["phone-portrait.jpg", "tiny.png"] {
            #expect(try CLI.run(["get", root, key, "--variant", "pixel100", "--output", "\(root)/x.png"]).status == 0)
        }
    }

    @Test("gc deletes nothing when a manifest cannot be read (its blobs would look unnamed)")
    func gcStopsOnABadManifest() throws {
        let (root, orphan) = try Self.store()
        defer { Fixtures.remove(root) }
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: "\(root)/manifests/broken.jpg.json"))
        let before = try Self.blobPaths(root)
        let result = try CLI.run(["gc", root, "--grace", "0"])
        #expect(result.status == 1 && result.stderr.contains("broken.jpg") && result.stderr.contains("nothing was deleted"), "\(result.stderr)")
        #expect(try Self.blobPaths(root) == before && FileManager.default.fileExists(atPath: orphan))
    }

    /// Publishes a manifest naming a blob right after gc sets it aside: an upload that reused an old orphan.
    struct RacingUpload: StoreInventory {
        let base: DirectoryInventory
        let manifest: [UInt8]
        var location: String { base.location }
        func manifests(prefix: String) throws -> [StoreEntry] { try base.manifests(prefix: prefix) }
        func manifestBytes(_ key: String) throws -> [UInt8]? { try base.manifestBytes(key) }
        func blobs() throws -> [StoreEntry] { try base.blobs() }
        func blobBytes(_ hex: String) throws -> [UInt8]? { try base.blobBytes(hex) }
        func setAside(_ blob: StoreEntry, unlessWrittenAfter cutoff: Double) throws -> SetAsideBlob? {
            let taken = try base.setAside(blob, unlessWrittenAfter: cutoff)
            try Data(manifest).write(to: URL(fileURLWithPath: "\(base.root)/manifests/late.jpg.json"))
            return taken
        }
        func putBack(_ blob: SetAsideBlob) throws { try base.putBack(blob) }
        func discard(_ blob: SetAsideBlob) throws { try base.discard(blob) }
    }

    @Test("an old orphan that a manifest published during gc names is put back, not deleted")
    func gcRace() throws {
        let (root, orphan) = try Self.store()
        defer { Fixtures.remove(root) }
        let hex = (orphan as NSString).lastPathComponent
        var late = try Self.manifest(root, "tiny.png")
        late.key = "late.jpg"
        late.variants["square100"]!.digest = "sha256:\(hex)"
        let store = RacingUpload(base: try DirectoryInventory(root: root), manifest: [UInt8](late.json(pretty: true)))
        let report = try GarbageCollector(store: store, grace: 3600).run(dryRun: false)
        #expect(report.kept.map(\.name) == [hex])
        #expect(report.deleted.isEmpty)
        #expect(FileManager.default.fileExists(atPath: orphan))
        #expect(TempFiles.find(under: root).isEmpty, "nothing is left set aside")
    }

    @Test("ls, get and gc never follow a symbolic link planted inside the store")
    func symlinks() throws {
        let (root, _) = try Self.store()
        defer { Fixtures.remove(root) }
        let secret = "\(root)/../snapthumb-secret-\(UUID().uuidString)"
        defer { Fixtures.remove(secret) }
        try Data(#"{"variants": {"x": {"digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}}}"#.utf8)
            .write(to: URL(fileURLWithPath: secret))
        try FileManager.default.createSymbolicLink(atPath: "\(root)/manifests/evil.jpg.json", withDestinationPath: secret)
        let get = try CLI.run(["get", root, "evil.jpg", "--manifest"])
        #expect(get.status == 1 && get.stderr.contains("symbolic link") && get.stdout.isEmpty, "\(get.stdout)\(get.stderr)")
        let ls = try CLI.run(["ls", root])
        #expect(ls.status == 0 && !ls.stdout.contains("evil"), "\(ls.stdout)\(ls.stderr)")
        let gc = try CLI.run(["gc", root, "--grace", "0", "--dry-run"])
        #expect(gc.status == 0 && gc.stdout.split(separator: "\n").count == 1, "only the orphan: \(gc.stdout)\(gc.stderr)")
    }

    @Test("usage errors before any work: a file as --store, verify/ls/gc of a missing directory")
    func usage() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let file = "\(root)/file"
        FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        let cases: [[String]] = [
            ["process", Fixtures.sample("snaps/tiny.png"), "--store", file],
            ["backfill", Fixtures.sample("snaps"), "--store", file],
            ["watch", root, "--store", file],
            ["verify", "\(root)/missing"], ["verify", file],
            ["ls", "\(root)/missing"], ["get", "\(root)/missing", "a.jpg"], ["gc", "\(root)/missing"],
            ["ls", root], ["gc", root, "--grace", "soon"],
        ]
        for arguments in cases {
            let result = try CLI.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(!result.stderr.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: "\(root)/missing"), "nothing is created")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "x")
    }
}
