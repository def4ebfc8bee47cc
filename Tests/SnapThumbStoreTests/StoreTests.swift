@testable import SnapThumbStore
@testable import SystemKit
import Foundation
import Synchronization
@_spi(Testing) import SnapThumbTesting
import Testing
import SnapThumbVerify
import VipsKit
@testable import SnapThumbCore

@Suite("Store, manifest, determinism")
struct StoreTests {
    @Test("same input and settings: byte-identical outputs and manifest")
    func deterministic() throws {
        for file in ["snaps/phone-portrait.jpg", "snaps/iphone.heic", "snaps/alpha.png", "snaps/landscape.webp"] {
            let bytes = try Fixtures.bytes(Fixtures.sample(file))
            let a = try Fixtures.process(bytes, key: "k")
            let b = try Fixtures.pipeline().process(SourceBuffer(bytes), key: "k")
            #expect(a.manifest.json() == b.manifest.json(), "\(file)")
            #expect(a.blobs == b.blobs, "\(file)")
        }
    }

    @Test("a setting that changes output changes the recipe digest; limits do not")
    func recipe() throws {
        let base = try Fixtures.pipeline().recipe
        #expect(try Fixtures.pipeline { $0.square.budget = 2000 }.recipe.digest != base.digest)
        #expect(try Fixtures.pipeline { $0.pixel.dither = true }.recipe.digest != base.digest)
        #expect(try Fixtures.pipeline { $0.limits.maxPixels = 5 }.recipe.digest == base.digest)
        #expect(base.digest.hasPrefix("sha256:") && base.digest.count == 71)
        #expect(base.libvips == Vips.version)
    }

    @Test("blobs/sha256 is marked as the top of unrelated directories where the filesystem has the flag (ext4)")
    func fanOutSpread() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let plain = root + "/plain"
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: true)
        guard let before = FileSystem.isTopDirectory(plain) else { return }  // tmpfs, XFS: no such flag
        #expect(before == false)
        _ = try Store(root: root + "/store")
        #expect(FileSystem.isTopDirectory(root + "/store/blobs/sha256") == true)
        #expect(FileSystem.isTopDirectory(root + "/store/manifests") == false)
        #expect(FileSystem.isTopDirectory(root + "/store") == false)
    }

    /// `count` blobs whose digests start with `count` different fan-out names.
    private static func blobsInDistinctFanOuts(_ count: Int) -> [Blob] {
        var byPrefix: [Substring: Blob] = [:]
        var n = 0
        while byPrefix.count < count {
            let blob = Blob(Array("blob \(n)".utf8))
            if byPrefix[blob.hex.prefix(2)] == nil { byPrefix[blob.hex.prefix(2)] = blob }
            n += 1
        }
        return byPrefix.keys.sorted().map { byPrefix[$0]! }
    }

    @Test("under the top-directory flag, 7 new fan-out directories in 8 are made beside one the allocator placed; none left half made")
    func fanOutMadeBeside() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let flagged = FileSystem.isTopDirectory(root + "/blobs/sha256") == true
        let blobs = Self.blobsInDistinctFanOuts(64)
        for blob in blobs { #expect(try store.put(blob, sync: false)) }
        // The first of each eight is placed by the allocator, the next seven beside it.
        #expect(store.fanOutMadeBeside == (flagged ? 56 : 0))
        for blob in blobs {
            #expect(try Fixtures.bytes("\(root)/\(StoreLayout.blobPath(blob.hex))") == blob.bytes)
        }
        let fanOuts = try FileManager.default.contentsOfDirectory(atPath: root + "/blobs/sha256")
        #expect(Set(fanOuts) == Set(blobs.map { String($0.hex.prefix(2)) }))
        #expect(TempFiles.find(under: root).isEmpty, "no temporary directory is left in an anchor")
        // A second store on the same root finds them all and makes none.
        let again = try Store(root: root)
        for blob in blobs { #expect(try again.put(blob, sync: false) == false) }
        #expect(again.fanOutMadeBeside == 0)
    }

    @Test("a fan-out directory moved out of the store is not made into an anchor's place: nothing is written in it")
    func movedAnchor() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root + "/store")
        let flagged = FileSystem.isTopDirectory(root + "/store/blobs/sha256") == true
        let blobs = Self.blobsInDistinctFanOuts(9)
        #expect(try store.put(blobs[0], sync: false))
        let first = String(blobs[0].hex.prefix(2))
        #expect(rename("\(root)/store/blobs/sha256/\(first)", "\(root)/moved") == 0)
        // The moved anchor is dropped: the next directory is placed anew (not made beside the moved
        // one), the 7 after it beside that one.
        #expect(try store.put(blobs[1], sync: false))
        #expect(store.fanOutMadeBeside == 0)
        for blob in blobs.dropFirst(2) { #expect(try store.put(blob, sync: false)) }
        #expect(store.fanOutMadeBeside == (flagged ? 7 : 0))
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/moved") == [blobs[0].hex])
        for blob in blobs.dropFirst() {
            #expect(try Fixtures.bytes("\(root)/store/\(StoreLayout.blobPath(blob.hex))") == blob.bytes)
        }
    }

    @Test("stores of several processes opened at once and making the same fan-out directories: each made once, every blob kept, nothing left over")
    func fanOutRace() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        // Opened at once on a fresh root: each makes (or finds) blobs/sha256 and manifests.
        let opened = Mutex<[Result<Store, any Error>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let store = Result { try Store(root: root) }
            opened.withLock { $0.append(store) }
        }
        let stores = try opened.withLock { $0 }.map { try $0.get() }
        #expect(FileManager.default.fileExists(atPath: root + "/manifests"))
        let blobs = Self.blobsInDistinctFanOuts(96)
        // Each store writes every blob in the same order: the same fan-out names are made by
        // four stores at once, as by four workers of one run.
        let outcomes = Mutex<(created: Int, failures: [String])>((0, []))
        DispatchQueue.concurrentPerform(iterations: stores.count) { i in
            for blob in blobs {
                do {
                    let created = try stores[i].put(blob, sync: false)
                    outcomes.withLock { $0.created += created ? 1 : 0 }
                } catch { outcomes.withLock { $0.failures.append("\(error)") } }
            }
        }
        #expect(outcomes.withLock { $0.failures }.isEmpty)
        #expect(outcomes.withLock { $0.created } == blobs.count, "each blob created once, found by the other stores")
        for blob in blobs {
            #expect(try Fixtures.bytes("\(root)/\(StoreLayout.blobPath(blob.hex))") == blob.bytes)
        }
        #expect(TempFiles.find(under: root).isEmpty)
        let fanOuts = try FileManager.default.contentsOfDirectory(atPath: root + "/blobs/sha256")
        #expect(Set(fanOuts) == Set(blobs.map { String($0.hex.prefix(2)) }))
    }

    @Test("an empty temporary directory left by a dead store is removed; one of a live process, or one with anything in it, is not")
    func staleTempDirectories() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let dead = try Fixtures.deadPID()
        let anchor = root + "/blobs/sha256/ab"
        try FileManager.default.createDirectory(atPath: anchor, withIntermediateDirectories: true)
        let stale = "\(anchor)/.tmp-\(dead)-1-cd", live = "\(anchor)/.tmp-\(getpid())-2-ce", full = "\(anchor)/.tmp-\(dead)-3-cf"
        for path in [stale, live, full] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) }
        try Data("not ours".utf8).write(to: URL(fileURLWithPath: full + "/kept"))
        #expect(TempFiles.removeStale(under: root) == 1)
        #expect(!FileManager.default.fileExists(atPath: stale))
        #expect(FileManager.default.fileExists(atPath: live))
        #expect(FileManager.default.fileExists(atPath: full + "/kept"))
    }

    @Test("layout: blobs under their digest, manifest under its key, each blob stored once")
    func layout() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let pipeline = try Fixtures.pipeline()
        try store.commit(pipeline.process(SourceBuffer(bytes), key: "2026/11/a.jpg"))
        try store.commit(pipeline.process(SourceBuffer(bytes), key: "2026/11/copy.jpg"))

        let manifestData = try #require(FileManager.default.contents(atPath: "\(root)/manifests/2026/11/a.jpg.json"))
        let manifest = try Manifest.decode(manifestData)
        #expect(manifest.key == "2026/11/a.jpg")
        #expect(manifest.schema == "snapthumb.manifest.v1")
        #expect(manifest.source.digest == "sha256:" + SHA256.hex(bytes))
        #expect(manifest.source.bytes == bytes.count)
        #expect(Set(manifest.variants.keys) == ["square100", "pixel25", "pixel100"])
        for variant in manifest.variants.values {
            let hex = String(variant.digest.dropFirst(7))
            #expect(variant.path == "blobs/sha256/\(hex.prefix(2))/\(hex)")
            let blob = try Fixtures.bytes("\(root)/\(variant.path)")
            #expect(SHA256.hex(blob) == hex && blob.count == variant.bytes)
        }
        let blobFiles = try FileWalker.regularFiles(under: "\(root)/blobs").files
        #expect(blobFiles.count == 3)
        #expect(!blobFiles.contains { $0.relativePath.contains(".tmp") })

        #expect((try ManifestSchema.validator()).validate(manifestData).isEmpty)
        #expect(try StoreVerifier.verify(root: root).isClean)
    }

    @Test("every manifest the tool writes validates against the schema")
    func schema() throws {
        let files = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files
        for settings in [Settings(), { var s = Settings(); s.square.budget = nil; s.pixel.palette = .named("pico8"); s.budgetMode = .inline; return s }()] {
            let pipeline = try Pipeline(settings: settings)
            for file in files {
                let upload = try pipeline.process(file: file.path, key: file.relativePath)
                for json in [upload.manifest.json(), upload.manifest.json(pretty: true)] {
                    let errors = (try ManifestSchema.validator()).validate(json)
                    #expect(errors.isEmpty, "\(file.relativePath): \(errors)")
                }
            }
        }
    }

    @Test("verify finds damaged, missing and invalid entries")
    func verifyFindsProblems() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let pipeline = try Fixtures.pipeline()
        let a = try pipeline.process(file: Fixtures.sample("snaps/phone-portrait.jpg"), key: "a.jpg")
        let b = try pipeline.process(file: Fixtures.sample("snaps/landscape.webp"), key: "b.webp")
        try store.commit(a)
        try store.commit(b)
        #expect(try StoreVerifier.verify(root: root).isClean)

        // Flip a byte in one blob, delete another, break a manifest.
        let damaged = "\(root)/\(a.manifest.variants["square100"]!.path)"
        var bytes = try Fixtures.bytes(damaged)
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: damaged))
        try FileManager.default.removeItem(atPath: "\(root)/\(b.manifest.variants["pixel25"]!.path)")
        try Data(#"{"schema":"snapthumb.manifest.v1","key":"c.jpg"}"#.utf8).write(to: URL(fileURLWithPath: "\(root)/manifests/c.jpg.json"))

        let report = try StoreVerifier.verify(root: root)
        let text = report.problems.joined(separator: "\n")
        #expect(text.contains(damaged) && text.contains("hashes to"))
        #expect(text.contains("b.webp.json") && text.contains("missing blob"))
        #expect(text.contains("c.jpg.json") && text.contains("schema"))
    }

    @Test("an existing blob is reused; one whose bytes do not match its name is repaired")
    func existingBlobs() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let blob = Blob([1, 2, 3])
        #expect(try store.put(blob))
        #expect(try !store.put(blob))
        // What a power cut before a group sync can leave: the name, without the bytes.
        try Data().write(to: URL(fileURLWithPath: "\(root)/\(blob.path)"))
        #expect(try !store.put(blob))
        #expect(try Fixtures.bytes("\(root)/\(blob.path)") == [1, 2, 3])
    }

    @Test("a batch commit publishes every manifest over durable blobs, and fails per upload")
    func batch() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let pipeline = try Fixtures.pipeline()
        let uploads = try ["snaps/phone-portrait.jpg", "snaps/landscape.webp", "snaps/tiny.png"].map {
            try pipeline.process(file: Fixtures.sample($0), key: "batch/\(($0 as NSString).lastPathComponent)")
        }
        // An upload that cannot be published fails alone and leaves nothing.
        let grey = try pipeline.process(file: Fixtures.sample("snaps/grey.jpg"), key: "grey.jpg")
        var escaping = grey.manifest
        escaping.key = "../grey.jpg"
        let results = store.commitBatch(uploads + [ProcessedUpload(manifest: escaping, blobs: grey.blobs)])
        #expect(results.prefix(3).allSatisfy { $0 == nil })
        #expect(results[3]?.code == .unsafeName)
        let report = try StoreVerifier.verify(root: root)
        #expect(report.isClean, "\(report.problems)")
        #expect(report.manifests == 3)
        for blob in grey.blobs { #expect(!FileManager.default.fileExists(atPath: "\(root)/\(blob.path)")) }
    }

    @Test("a staged manifest waits beside its first blob and is moved into manifests/ when published; repeats, conflicts and discards leave no temp file")
    func manifestTempBesideBlob() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let pipeline = try Fixtures.pipeline()
        let upload = try pipeline.process(file: Fixtures.sample("snaps/phone-portrait.jpg"), key: "k/a.jpg")
        let staged = try store.stage(upload)
        let fanOut = "\(root)/blobs/sha256/\(upload.blobs[0].hex.prefix(2))"
        let waiting = TempFiles.find(under: fanOut)
        #expect(waiting.count == 1 && waiting.allSatisfy { $0.path.hasSuffix("a.jpg.json") && $0.pid == getpid() }, "\(waiting)")
        #expect(TempFiles.find(under: "\(root)/manifests").isEmpty)
        #expect(!FileManager.default.fileExists(atPath: "\(root)/manifests/k/a.jpg.json"))

        #expect(store.publishBatch([staged]) == [nil])
        let published = try #require(FileManager.default.contents(atPath: "\(root)/manifests/k/a.jpg.json"))
        #expect(try Manifest.decode(published).key == "k/a.jpg")
        #expect(TempFiles.find(under: root).isEmpty)

        // The same upload again (a repeat), another source under the key (refused), one discarded.
        #expect(store.publishBatch([try store.stage(upload)]) == [nil])
        let other = try pipeline.process(file: Fixtures.sample("snaps/tiny.png"), key: "k/a.jpg")
        #expect(store.publishBatch([try store.stage(other)]).first??.code == .conflict)
        store.discard(try store.stage(try pipeline.process(file: Fixtures.sample("snaps/grey.jpg"), key: "k/b.jpg")))
        #expect(TempFiles.find(under: root).isEmpty)
        #expect(FileManager.default.contents(atPath: "\(root)/manifests/k/a.jpg.json") == published)
        #expect(!FileManager.default.fileExists(atPath: "\(root)/manifests/k/b.jpg.json"))
        #expect(try StoreVerifier.verify(root: root).isClean)
    }

    @Test("a failed commit leaves nothing behind")
    func failedCommitRollsBack() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        let upload = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/phone-portrait.jpg"), key: "dir/a.jpg")
        // A file where the manifest's directory should be makes publishing fail.
        try Data().write(to: URL(fileURLWithPath: "\(root)/manifests/dir"))
        #expect(throws: SnapError.self) { try store.commit(upload) }
        #expect(try FileWalker.regularFiles(under: "\(root)/blobs").files.isEmpty)
    }
}

@Suite("Paths")
struct PathsTests {
    @Test("parent(of:) is dirname without its dot, and never traps on a one-character name")
    func parent() {
        #expect(Paths.parent(of: "s") == "")
        #expect(Paths.parent(of: "ab") == "")
        #expect(Paths.parent(of: "a/b") == "a")
        #expect(Paths.parent(of: "a/b/") == "a")
        #expect(Paths.parent(of: "./s") == ".")
        #expect(Paths.parent(of: "/a") == "/")
        #expect(Paths.parent(of: "/") == "/")
        #expect(Paths.parent(of: "x//y") == "x")
    }
}
