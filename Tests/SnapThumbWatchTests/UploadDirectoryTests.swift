#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SystemKit
import SnapThumbCore
import SnapThumbStore
import Testing
// Claims, Quarantine and UploadDirectory are the watch daemon's inner parts, not API:
// making them public only for these tests would be wrong, so the tests reach them here.
@testable import SnapThumbWatch

/// The watch folder's claims, quarantine and folder checks through their own API, without
/// a daemon (the daemon end to end: SnapThumbCLITests/Watch).
@Suite struct UploadDirectoryTests {
    final class Folder {
        let root: String
        init() throws {
            var template = Array("/tmp/snapthumb-updir-XXXXXX".utf8CString)
            guard let dir = mkdtemp(&template) else { throw SnapError(.io, "mkdtemp failed") }
            root = String(cString: dir)
        }
        deinit { try? FileManager.default.removeItem(atPath: root) }
        var uploads: String { root + "/up" }
        func write(_ path: String, _ text: String = "x") throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(root)/\(path)"))
        }
        func exists(_ path: String) -> Bool { POSIX.status(Array("\(root)/\(path)".utf8)) != nil }
        func names(_ path: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: "\(root)/\(path)")) ?? []).sorted() }
    }

    let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    func open(_ f: Folder, worker: String = "me") throws -> (UploadDirectory, Claims) {
        let uploads = try UploadDirectory(layout: Layout(root: f.uploads))
        let quarantine = Quarantine(uploads: uploads, logger: logger)
        let claims = try Claims(uploads: uploads, me: WorkerIdentity(id: worker), leaseTimeout: 60, maxAttempts: 3,
                                quarantine: quarantine, logger: logger)
        try claims.register()
        return (uploads, claims)
    }

    @Test func claimCompleteAndReleaseMoveOnlyBetweenTheFolders() throws {
        let f = try Folder()
        let (_, claims) = try open(f)
        try f.write("up/incoming/a.jpg")
        try f.write("up/incoming/b.jpg")
        guard case .claimed = claims.claim("a.jpg") else { Issue.record("not claimed"); return }
        #expect(f.names("up/processing/me") == [".lease", "a.jpg"])
        if case .gone = claims.claim("a.jpg") {} else { Issue.record("a second claim of the same name is gone") }
        #expect(try claims.complete("a.jpg", key: "a.jpg", delete: false) == "a.jpg")
        #expect(f.names("up/done") == ["a.jpg"])
        // A second source of the same key never replaces the first.
        try f.write("up/incoming/a.jpg", "second")
        _ = claims.claim("a.jpg")
        #expect(try claims.complete("a.jpg", key: "a.jpg", delete: false) == "a~2.jpg")
        // Released back, and never over a newer upload of that name.
        _ = claims.claim("b.jpg")
        try f.write("up/incoming/b.jpg", "newer")
        claims.release("b.jpg")
        #expect(claims.holds("b.jpg"), "the claim stays where it is")
        #expect(try String(contentsOfFile: "\(f.uploads)/incoming/b.jpg", encoding: .utf8) == "newer")
        try FileManager.default.removeItem(atPath: "\(f.uploads)/incoming/b.jpg")
        claims.release("b.jpg")
        #expect(f.names("up/incoming") == ["b.jpg"])
        claims.unregister()
        #expect(!f.exists("up/processing/me"))
    }

    @Test func aFolderReplacedAfterOpeningIsReportedAndNeverUsed() throws {
        let f = try Folder()
        let (uploads, claims) = try open(f)
        #expect(uploads.problem() == nil)
        try FileManager.default.createDirectory(atPath: "\(f.root)/outside", withIntermediateDirectories: true)
        #expect(rename("\(f.uploads)/done", "\(f.uploads)/done.real") == 0)
        #expect(symlink("\(f.root)/outside", "\(f.uploads)/done") == 0)
        #expect(uploads.problem()?.contains("done was replaced by a symbolic link") == true)
        // What is done meanwhile still goes to the folder opened at start.
        try f.write("up/incoming/a.jpg")
        _ = claims.claim("a.jpg")
        _ = try claims.complete("a.jpg", key: "a.jpg", delete: false)
        #expect(f.names("outside").isEmpty)
        #expect(f.names("up/done.real") == ["a.jpg"])
        #expect(unlink("\(f.uploads)/done") == 0)
        #expect(uploads.problem() == "\(f.uploads)/done was removed or renamed")
    }

    @Test func aFolderThatIsASymlinkIsRefusedAtOpen() throws {
        let f = try Folder()
        try FileManager.default.createDirectory(atPath: f.uploads, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(f.root)/outside", withIntermediateDirectories: true)
        #expect(symlink("\(f.root)/outside", "\(f.uploads)/failed") == 0)
        #expect(Layout(root: f.uploads).unsafeFolder()?.contains("failed is a symbolic link") == true)
        #expect(throws: SnapError.self) { _ = try UploadDirectory(layout: Layout(root: f.uploads)) }
        #expect(f.names("outside").isEmpty)
    }

    @Test func onlyRealClaimFoldersOfThisUserWithARegularLeaseAreTakenOver() throws {
        let f = try Folder()
        let (_, claims) = try open(f)
        let host = WorkerIdentity.hostname()
        func lease(_ worker: String, pid: Int32) -> String { #"{"worker":"\#(worker)","host":"\#(host)","pid":\#(pid)}"# }
        // A dead worker's real folder: taken over, its lease and our temp names removed, the folder too.
        try FileManager.default.createDirectory(atPath: "\(f.uploads)/processing/dead", withIntermediateDirectories: true)
        try f.write("up/processing/dead/.lease", lease("dead", pid: 999_999))
        try f.write("up/processing/dead/u.jpg")
        try f.write("up/processing/dead/.tmp-999999-1-.lease")
        // A symlink to an outside folder with a lease naming a dead pid: left alone.
        try FileManager.default.createDirectory(atPath: "\(f.root)/outside", withIntermediateDirectories: true)
        try f.write("outside/.lease", lease("planted", pid: 999_999))
        try f.write("outside/victim.jpg")
        try f.write("outside/.tmp-999999-1-x")
        #expect(symlink("\(f.root)/outside", "\(f.uploads)/processing/planted") == 0)
        // A real folder whose lease is a symlink: left alone.
        try FileManager.default.createDirectory(atPath: "\(f.uploads)/processing/odd", withIntermediateDirectories: true)
        #expect(symlink("\(f.root)/outside/.lease", "\(f.uploads)/processing/odd/.lease") == 0)
        try f.write("up/processing/odd/o.jpg")
        // A live worker (this process): left alone.
        try FileManager.default.createDirectory(atPath: "\(f.uploads)/processing/live", withIntermediateDirectories: true)
        try f.write("up/processing/live/.lease", lease("live", pid: getpid()))
        try f.write("up/processing/live/l.jpg")

        #expect(claims.takeOverAbandoned(includingMine: false) == ["u.jpg"])
        #expect(f.names("up/processing/me") == [".lease", "u.jpg"])
        #expect(!f.exists("up/processing/dead"))
        #expect(f.names("outside") == [".lease", ".tmp-999999-1-x", "victim.jpg"])
        #expect(f.names("up/processing/odd") == [".lease", "o.jpg"])
        #expect(f.names("up/processing/live") == [".lease", "l.jpg"])
    }

    @Test func quarantineWritesTheRecordThenTheUploadIntoFailed() throws {
        let f = try Folder()
        let (uploads, claims) = try open(f)
        let quarantine = Quarantine(uploads: uploads, logger: logger)
        for _ in 0..<2 {
            try f.write("up/incoming/bad.jpg")
            _ = claims.claim("bad.jpg")
            #expect(quarantine.quarantine("bad.jpg", in: claims.claimDirectory, key: "bad.jpg", error: SnapError(.corrupt, "broken"), attempts: 1, worker: "me"))
        }
        #expect(f.names("up/failed") == ["bad.jpg", "bad.jpg.error.json", "bad~2.jpg", "bad~2.jpg.error.json"])
        let record = try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(f.uploads)/failed/bad~2.jpg.error.json")))
        #expect(record.code == "corrupt" && record.key == "bad.jpg")
        // A claim that is gone gets no record.
        #expect(!quarantine.quarantine("gone.jpg", in: claims.claimDirectory, key: "gone.jpg", error: SnapError(.corrupt, "x"), attempts: 1, worker: "me"))
        #expect(f.names("up/failed").count == 4)
    }

    @Test func aBlockedPlaceInTheStoreIsTheStoresConditionNotTheUploads() {
        #expect(Processor.isStoreCondition(SnapError(.unsafeName, "s/manifests is a symbolic link inside the store"), key: "a.jpg"))
        #expect(Processor.isStoreCondition(SnapError(.io, "s/manifests/a.jpg.json is not a file (a directory?) and \(StoreBlocked.phrase): …"), key: "a.jpg"))
        // A key that is unsafe in itself is the upload's own fault.
        #expect(!Processor.isStoreCondition(SnapError(.unsafeName, "control characters"), key: "a\u{1}.jpg"))
        #expect(!Processor.isStoreCondition(SnapError(.io, "disk full"), key: "a.jpg"))
        #expect(!Processor.isStoreCondition(SnapError(.corrupt, "broken"), key: "a.jpg"))
    }
}
