import Foundation
@_spi(Testing) import SnapThumbTesting
import SnapThumbStore
import SystemKit
import Testing
@testable import SnapThumbCore

/// The store keeps `blobs/sha256` and `manifests` open between uploads (issue 27): the
/// path is checked again before each use, so a directory removed, recreated or swapped
/// for a symbolic link while a store is open is handled as a fresh open handles it.
@Suite("Store: directories kept open")
struct StoreOpenDirectoryTests {
    @Test("a manifests directory removed and made again while the store is open is used, not the removed one")
    func recreated() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let pipeline = try Fixtures.pipeline()
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        try store.commit(pipeline.process(SourceBuffer(bytes), key: "a.jpg"))
        for directory in ["manifests", "blobs"] {
            try FileManager.default.removeItem(atPath: "\(root)/\(directory)")
            try FileManager.default.createDirectory(atPath: "\(root)/\(directory)", withIntermediateDirectories: false)
        }
        try store.commit(pipeline.process(SourceBuffer(bytes), key: "b.jpg"))
        #expect(FileManager.default.fileExists(atPath: "\(root)/manifests/b.jpg.json"))
        #expect(try store.manifest(for: "b.jpg") != nil)
        let blobs = try FileWalker.regularFiles(under: "\(root)/blobs").files
        #expect(blobs.count == 3)
    }

    @Test("a manifests directory swapped for a symbolic link while the store is open is refused, never followed")
    func swappedForSymlink() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let elsewhere = "\(root)/elsewhere", store = "\(root)/store"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let opened = try Store(root: store)
        let upload = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "a.jpg")
        try FileManager.default.moveItem(atPath: "\(store)/manifests", toPath: "\(elsewhere)/manifests")
        try FileManager.default.createSymbolicLink(atPath: "\(store)/manifests", withDestinationPath: "\(elsewhere)/manifests")
        #expect(throws: SnapError.self) { try opened.commit(upload) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(elsewhere)/manifests") == [], "nothing written outside the store")
    }
}

/// The blobs' fan-out directories (`blobs/sha256/<2 hex>`) are kept open too, each checked by one
/// `fstatat` below `blobs/sha256` before use: one removed, or swapped for a symbolic link, while the
/// store is open is handled as a fresh open handles it.
@Suite("Store: fan-out directories kept open")
struct StoreFanOutDirectoryTests {
    /// The fan-out directories an upload's blobs go to, and the upload.
    private func upload() throws -> (ProcessedUpload, [String]) {
        let upload = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "a.jpg")
        return (upload, Array(Set(upload.blobs.map { String($0.hex.prefix(2)) })).sorted())
    }

    @Test("fan-out directories removed while the store is open are made again, and the blobs land in them")
    func removedFanOut() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let (first, fanOuts) = try upload()
        try store.commit(first)
        for name in fanOuts { try FileManager.default.removeItem(atPath: "\(root)/blobs/sha256/\(name)") }
        // The same blobs under another key: written again, into the new directories.
        let second = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "b.jpg")
        try store.commit(second)
        for blob in second.blobs {
            let path = "\(root)/\(blob.path)"
            #expect(FileManager.default.contents(atPath: path).map { [UInt8]($0) } == blob.bytes, "\(blob.path) is there, whole")
        }
        #expect(try FileWalker.regularFiles(under: "\(root)/blobs").files.count == second.blobs.count)
    }

    @Test("a fan-out directory swapped for a symbolic link while the store is open is refused, never followed")
    func swappedFanOut() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let elsewhere = "\(root)/elsewhere", storeRoot = "\(root)/store"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        let store = try Store(root: storeRoot)
        let (first, fanOuts) = try upload()
        try store.commit(first)
        // Every fan-out directory of these blobs becomes a link to an empty directory elsewhere.
        for name in fanOuts {
            try FileManager.default.createDirectory(atPath: "\(elsewhere)/\(name)", withIntermediateDirectories: false)
            try FileManager.default.removeItem(atPath: "\(storeRoot)/blobs/sha256/\(name)")
            try FileManager.default.createSymbolicLink(atPath: "\(storeRoot)/blobs/sha256/\(name)", withDestinationPath: "\(elsewhere)/\(name)")
        }
        let second = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "b.jpg")
        #expect { try store.commit(second) } throws: { ($0 as? SnapError)?.code == .unsafeName }
        for name in fanOuts {
            #expect(try FileManager.default.contentsOfDirectory(atPath: "\(elsewhere)/\(name)") == [], "nothing written outside the store")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(storeRoot)/manifests/b.jpg.json"))
    }

    @Test("blobs sharing fan-out directories across uploads are each stored once, in the layout")
    func sharedFanOut() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let pipeline = try Fixtures.pipeline()
        var expected: [String: [UInt8]] = [:]
        for (i, sample) in ["snaps/grey.jpg", "snaps/phone-portrait.jpg", "snaps/grey.jpg"].enumerated() {
            let upload = try pipeline.process(file: Fixtures.sample(sample), key: "k\(i).jpg")
            try store.commit(upload)
            for blob in upload.blobs { expected[blob.path] = blob.bytes }
        }
        let files = try FileWalker.regularFiles(under: root).files.map(\.relativePath).sorted()
        #expect(files == (Array(expected.keys) + ["manifests/k0.jpg.json", "manifests/k1.jpg.json", "manifests/k2.jpg.json"]).sorted())
        for (path, bytes) in expected {
            #expect(FileManager.default.contents(atPath: "\(root)/\(path)").map { [UInt8]($0) } == bytes)
        }
    }
}
