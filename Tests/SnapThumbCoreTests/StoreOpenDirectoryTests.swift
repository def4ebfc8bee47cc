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
