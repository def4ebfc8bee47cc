#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
import SnapThumbCore
@testable import SnapThumbWatch

/// Claims left by workers that died, built by hand so that each case is certain.
@Suite(.serialized) struct CrashRecoveryTests {

    func claim(_ h: WatchHarness, worker: String, name: String, bytes: [UInt8], lease: Lease?, leaseAge: Double = 0) throws {
        let dir = "\(h.uploads)/processing/\(worker)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: "\(dir)/\(name)"))
        if let lease {
            let path = "\(dir)/\(Lease.fileName)"
            try JSONEncoder().encode(lease).write(to: URL(fileURLWithPath: path))
            let then = Date().addingTimeInterval(-leaseAge)
            try FileManager.default.setAttributes([.modificationDate: then], ofItemAtPath: path)
        }
    }

    /// A dead worker's claims are taken over and processed alone, each in a child
    /// process; dying with a worker is no evidence against an upload, so nothing is
    /// counted (a legacy `~attempt-<n>` suffix only names the key).
    @Test func deadWorkersClaimsAreTakenOverAndProcessedAlone() throws {
        let h = try WatchHarness()
        let host = WorkerIdentity.hostname()
        let pid = try Fixtures.deadPID()
        let image = try TestImages.jpeg(3)
        // Same host, process gone: back at once, attempt counted.
        try claim(h, worker: "\(host).\(pid)", name: "crashed-once.jpg", bytes: image,
                  lease: Lease(worker: "\(host).\(pid)", host: host, pid: pid))
        // Two crashes before: this one is the third.
        try claim(h, worker: "\(host).\(pid)", name: "crashed-twice.jpg~attempt-2", bytes: image,
                  lease: Lease(worker: "\(host).\(pid)", host: host, pid: pid))
        // Another host, lease expired: back.
        try claim(h, worker: "far.1", name: "expired.jpg", bytes: image,
                  lease: Lease(worker: "far.1", host: "far-away-host", pid: 1), leaseAge: 600)
        // Another host, lease fresh: left alone.
        try claim(h, worker: "near.1", name: "leased.jpg", bytes: image,
                  lease: Lease(worker: "near.1", host: "far-away-host", pid: 1), leaseAge: 0)

        let worker = try h.start(["--lease-timeout", "60s"])
        eventually("recovered uploads are processed") {
            h.uploads(in: "done") == ["crashed-once.jpg", "crashed-twice.jpg", "expired.jpg"]
        }
        #expect(h.uploads(in: "failed").isEmpty)
        #expect(h.claimed() == ["leased.jpg"])
        #expect(worker.logText.contains("took over the claim of a dead worker"))
        #expect(worker.logText.contains("snap.isolated=true"))
    }

    @Test func anImageOverTheTimeLimitIsQuarantinedAsTimeout() throws {
        let h = try WatchHarness()
        let worker = try h.start(["--image-timeout", "1ms"])
        try h.drop("slow.jpg", try TestImages.jpeg(1, width: 2000, height: 1500))
        eventually("quarantined") { h.uploads(in: "failed") == ["slow.jpg"] }
        let record = try JSONDecoder().decode(ErrorRecord.self, from: Data(contentsOf: URL(fileURLWithPath: "\(h.uploads)/failed/slow.jpg.error.json")))
        #expect(record.code == "timeout")
        #expect(worker.process.isRunning)
    }

    @Test func tempFilesOfDeadProcessesAreRemovedFromTheStoreAtStart() throws {
        let h = try WatchHarness()
        let pid = try Fixtures.deadPID()
        let blobs = "\(h.store)/blobs/sha256/ab"
        try FileManager.default.createDirectory(atPath: blobs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(h.store)/manifests", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: "\(blobs)/.tmp-\(pid)-1-abcdef", contents: Data("partial".utf8))
        _ = FileManager.default.createFile(atPath: "\(h.store)/manifests/.tmp-\(pid)-2-a.jpg.json", contents: Data("{".utf8))
        #expect(h.tempFiles(under: h.store).count == 2)
        try h.start()
        eventually("temp files removed") { h.tempFiles(under: h.store).isEmpty }
        #expect(try h.verifyStore() == 0)
    }

    @Test func aSecondWorkerWithTheSameIdRefusesToStart() throws {
        let h = try WatchHarness()
        let first = try h.start(["--worker-id", "same"])
        eventually("first worker registered") { FileManager.default.fileExists(atPath: h.uploads + "/processing/same/.lease") }
        let second = try h.start(["--worker-id", "same"])
        #expect(second.waitForExit(seconds: 30) == 1)
        #expect(second.logText.contains("worker id same is in use by a running worker"))
        #expect(first.process.isRunning)
    }
}
