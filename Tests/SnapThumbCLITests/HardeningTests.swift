#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import SnapThumbRunner
import SnapThumbVerify
import VipsKit

@Suite("Hardening: names, unreadable sources, FIFOs, bounded crops", .serialized)
struct HardeningTests {
    // MARK: Sources that cannot be read

    @Test func aFIFOIsRefusedAtOnceInsteadOfBlocking() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let fifo = "\(dir)/pipe.jpg"
        #expect(mkfifo(fifo, 0o644) == 0)
        #expect(throws: SnapError.self) { _ = try InputFile.read(fifo, limit: 1 << 20) }
        do { _ = try InputFile.read(fifo, limit: 1 << 20) } catch let error as SnapError {
            #expect(error.code == .unsupported)
            #expect(error.message.contains("FIFO"))
        }
        // The command: a clear error and exit 1 (it used to block forever in open).
        let result = try CLI.run(["process", fifo, "--store", "\(dir)/store"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("\(fifo): unsupported:"))
    }

    @Test func permanentReasonsToBeUnreadableAreNotTransient() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        // A symlink loop on the way to the file: ELOOP.
        #expect(symlink("loop", "\(dir)/loop") == 0)
        do {
            _ = try InputFile.read("\(dir)/loop/a.jpg", limit: 1 << 20)
            Issue.record("read through a symlink loop")
        } catch let error as SnapError {
            #expect(error.code == .unreadable)
            #expect(!error.code.isTransient)
        }
        // A path component longer than a name may be: ENAMETOOLONG.
        do {
            _ = try InputFile.read("\(dir)/\(String(repeating: "n", count: 300))/a.jpg", limit: 1 << 20)
            Issue.record("read a path with a 300-byte component")
        } catch let error as SnapError {
            #expect(error.code == .unreadable)
        }
        // The upload itself being a symlink stays `unsupported`.
        #expect(symlink("/etc/hostname", "\(dir)/link.jpg") == 0)
        do { _ = try InputFile.read("\(dir)/link.jpg", limit: 1 << 20) } catch let error as SnapError {
            #expect(error.code == .unsupported)
        }
        #expect(SnapError.source("cannot open", "x", errno: EACCES).code == .unreadable)
        #expect(SnapError.source("cannot open", "x", errno: EPERM).code == .unreadable)
        #expect(SnapError.source("cannot open", "x", errno: EMFILE).code == .io)
    }

    // MARK: Names that are not UTF-8 (backfill)

    @Test func backfillProcessesNamesThatAreNotUTF8UnderTheirEscapedKeys() throws {
        let root = Fixtures.tempDirectory("snapthumb-latin1")
        let storeDir = Fixtures.tempDirectory("snapthumb-latin1-store")
        defer { Fixtures.remove(root); Fixtures.remove(storeDir) }
        let jpeg = try Fixtures.syntheticJPEG(width: 64, height: 48)
        let rootBytes = Array(root.utf8) + [0x2F]
        try createFile(bytes: rootBytes + Array("caf".utf8) + [0xE9] + Array(".jpg".utf8), contents: jpeg)
        try makeDirectory(bytes: rootBytes + [0xFF, 0xFE])
        try createFile(bytes: rootBytes + [0xFF, 0xFE, 0x2F] + Array("a.jpg".utf8), contents: jpeg)
        try createFile(bytes: rootBytes + Array("plain.jpg".utf8), contents: jpeg)

        let walk = try FileWalker.regularFiles(under: root)
        #expect(walk.files.map(\.relativePath) == ["%FF%FE/a.jpg", "caf%E9.jpg", "plain.jpg"])
        #expect(walk.files.map(\.path).allSatisfy { !$0.contains("\u{FFFD}") })

        let store = try Store(root: storeDir)
        let summary = try Backfill(pipeline: try Fixtures.pipeline(), store: store, jobs: 2).run(root: root)
        #expect(summary.total == 3 && summary.processed == 3 && summary.failures.isEmpty)
        #expect(try store.manifest(for: "caf%E9.jpg") != nil)
        #expect(try store.manifest(for: "%FF%FE/a.jpg") != nil)

        // The command line, with worker processes: the raw path travels to the worker.
        let cliStore = "\(storeDir)/cli"
        let result = try CLI.run(["backfill", root, "--store", cliStore, "--jobs", "2", "--report", "\(storeDir)/report.json"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(cliStore)/manifests/caf%E9.jpg.json"))
        #expect(FileManager.default.fileExists(atPath: "\(cliStore)/manifests/%FF%FE/a.jpg.json"))
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(storeDir)/report.json"))) as? [String: Any]
        #expect(report?["processed"] as? Int == 3)
    }

    // MARK: Work bounded before it starts

    @Test func theCropLooksAtMostAtAnEightToOneWindow() {
        #expect(cropWindow(width: 65000, height: 1) == (32496, 0, 8, 1))
        #expect(cropWindow(width: 1, height: 65000) == (0, 32496, 1, 8))
        #expect(cropWindow(width: 4000, height: 1000) == (0, 0, 4000, 1000))
        #expect(cropWindow(width: 9000, height: 1000) == (500, 0, 8000, 1000))
    }

    /// A 65000×1 JPEG of a few KB: with `attention`, the thumbnail used to scale the
    /// short side up to 100 (a 6.5-megapixel-wide strip measured whole: 42 s, 2.5 GB).
    @Test(arguments: [(65000, 1), (1, 65000)])
    func anExtremeAspectRatioWithAttentionCropIsCheap(width: Int, height: Int) throws {
        let jpeg = try Fixtures.syntheticJPEG(width: width, height: height)
        for crop in CropMode.allCases {
            let upload = try Fixtures.process(jpeg, key: "strip.jpg") { $0.square.crop = crop }
            #expect(upload.manifest.variants["square100"]?.width == 100)
            #expect(upload.manifest.source.width == width && upload.manifest.source.height == height)
        }
    }

    // MARK: What a failed file leaves

    /// README: a failed file never has a manifest; blobs a failed commit already
    /// linked into place stay (they are content-addressed and may be shared), and
    /// `verify` does not count them as problems.
    @Test func aFileThatFailsInTheStoreLeavesNoManifestAndAStoreThatVerifies() throws {
        let storeDir = Fixtures.tempDirectory()
        defer { Fixtures.remove(storeDir) }
        let store = try Store(root: storeDir)
        let upload = try Fixtures.process(try Fixtures.syntheticJPEG(width: 80, height: 60), key: "sub/a.jpg")
        // manifests/sub is a file: the manifest cannot be written after the blobs were.
        _ = FileManager.default.createFile(atPath: "\(storeDir)/manifests/sub", contents: Data())
        let results = store.commitBatch([upload])
        #expect(results.count == 1 && results[0]?.code == .io)
        #expect(try FileWalker.regularFiles(under: "\(storeDir)/manifests").files.map(\.relativePath) == ["sub"])
        // The blobs stay, as documented (another upload may share them).
        let blobs = try FileWalker.regularFiles(under: "\(storeDir)/blobs/sha256").files
        #expect(Set(blobs.map { ($0.relativePath as NSString).lastPathComponent }) == Set(upload.blobs.map(\.hex)))
        try FileManager.default.removeItem(atPath: "\(storeDir)/manifests/sub")
        let report = try StoreVerifier.verify(root: storeDir)
        #expect(report.isClean, "\(report.problems)")
        #expect(report.blobs == upload.blobs.count && report.manifests == 0)
    }
}
