#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// Moves uploads between `incoming/`, this worker's claim directory, `done/` and
/// back, and returns the claims of dead workers. Every move is one rename(2) between
/// directories held open by descriptor (`UploadDirectory`), so an upload is always in
/// exactly one place, whatever happens to the process, and nothing is moved through a
/// symlink that a writer of the upload directory planted or swapped in.
struct Claims: Sendable {
    let uploads: UploadDirectory
    let me: WorkerIdentity
    let leaseTimeout: Double
    let maxAttempts: Int
    let quarantine: Quarantine
    let logger: Logger
    /// This worker's claim directory, `processing/<worker>/`, held open.
    let claimDirectory: DirectoryHandle

    var layout: Layout { uploads.layout }
    /// The claim directory's path, for messages and for the worker processes (which
    /// reach it from the upload directory without following a symlink: `ConfinedFiles`).
    var mine: String { layout.claims(of: me.id) }

    /// The longest lease file read (a lease is about 100 bytes).
    static let leaseLimit = 4096

    /// Opens (creating it if needed) this worker's claim directory. Refused when a
    /// running worker holds that id, or when `processing/<worker>` is not a real
    /// directory of this user (a symlink planted there is never followed).
    init(uploads: UploadDirectory, me: WorkerIdentity, leaseTimeout: Double, maxAttempts: Int, quarantine: Quarantine, logger: Logger) throws(SnapError) {
        self.uploads = uploads
        self.me = me
        self.leaseTimeout = leaseTimeout
        self.maxAttempts = maxAttempts
        self.quarantine = quarantine
        self.logger = logger
        if let existing = uploads.processing.status(me.id) {
            guard existing.kind == .directory, existing.owner == geteuid() else {
                throw SnapError(.io, "\(uploads.layout.claims(of: me.id)) is not a directory of this user (a symbolic link?); it is never followed: remove it")
            }
            if !Self.isGone(me.id, in: uploads.processing, me: me, leaseTimeout: leaseTimeout) {
                throw SnapError(.config, "worker id \(me.id) is in use by a running worker (its lease in \(uploads.layout.claims(of: me.id)) is fresh); give each worker its own --worker-id")
            }
        }
        do { claimDirectory = try uploads.processing.subdirectory(me.id, create: true) } catch {
            throw UploadDirectory.folderError(uploads.processing, me.id, error.code)
        }
    }

    /// Writes this worker's lease (atomically, in the claim directory).
    func register() throws {
        let lease = Lease(worker: me.id, host: me.host, pid: me.pid)
        let json = try JSONEncoder().encode(lease)
        do {
            try claimDirectory.writeAtomically(Lease.fileName, [UInt8](json), tempName: Durable.tempName(for: Lease.fileName))
        } catch {
            throw SnapError.io("cannot write the lease", "\(mine)/\(Lease.fileName)", errno: error.code)
        }
    }

    /// Renews the lease (other hosts reclaim our uploads when it is older than `leaseTimeout`).
    func heartbeat() {
        if claimDirectory.touch(Lease.fileName) != 0 {
            do { try register() } catch {
                logger.error("cannot renew the lease", metadata: ["snap.error": "\(error)"])
            }
        }
    }

    /// Removes the lease and the (then empty) claim directory at a clean exit.
    func unregister() {
        claimDirectory.unlink(Lease.fileName)
        // Only if `processing/<worker>` is still this very directory.
        if uploads.processing.holds(me.id, claimDirectory) { uploads.processing.removeDirectory(me.id) }
    }

    enum ClaimResult { case claimed(String), gone, busy, failed(SnapError) }

    /// Claims `name` from `incoming/`. `.gone` when another worker took it first;
    /// `.busy` while this worker still holds an upload of the same name (a claim
    /// never replaces another).
    func claim(_ name: String) -> ClaimResult {
        let target = "\(mine)/\(name)"
        let code = uploads.incoming.moveNoReplace(name, to: claimDirectory, as: name)
        if code == 0 { return .claimed(target) }
        if code == ENOENT { return .gone }
        if code == EEXIST { return .busy }
        return .failed(SnapError.io("cannot claim \(layout.incoming)/\(name) into", target, errno: code))
    }

    /// Whether this worker's claim `name` is still there.
    func holds(_ name: String) -> Bool { claimDirectory.status(name) != nil }

    /// After the manifest is published: the source moves to `done/` (or is deleted).
    /// A source already in `done/` under that name is never overwritten: the new
    /// one gets a distinct name (`a~2.jpg`). Returns the name used in `done/`.
    @discardableResult
    func complete(_ name: String, key: String, delete: Bool) throws -> String? {
        if delete {
            let code = claimDirectory.unlink(name)
            guard code == 0 else { throw SnapError.io("cannot delete processed upload", "\(mine)/\(name)", errno: code) }
            return nil
        }
        return try FileOps.moveWithoutReplacing(name, from: claimDirectory, into: uploads.done, name: key)
    }

    /// Gives a claim back to `incoming/` unchanged (transient failure, or drain timeout).
    /// Never over a newer upload of the same name: then it stays claimed, and the next
    /// start of this worker id (or the worker that takes over its claims) processes it.
    func release(_ name: String) {
        let code = claimDirectory.moveNoReplace(name, to: uploads.incoming, as: name)
        if code == 0 || code == ENOENT && !holds(name) { return }
        logger.error(code == EEXIST ? "cannot return a claim to incoming/: a newer upload of that name is there; it stays claimed"
                                    : "cannot return a claim to incoming/; it stays claimed", metadata: [
            "snap.file": "\(mine)/\(name)", "snap.error": "\(String(cString: strerror(code)))"])
    }

    /// Takes over the claims of workers that are gone: each moves into this worker's
    /// claim directory under its own name and is returned, to be processed as a
    /// suspect (alone, in a child process: see `Processor`). Nothing is counted
    /// against an upload here: a worker that died with uploads in flight may have
    /// been killed from outside (SIGKILL, the OOM killer, a deploy), which says
    /// nothing about them. With `includingMine`, also this worker id's own leftovers
    /// (a restart with the same `--worker-id`).
    ///
    /// Only real directories of this user in `processing/` are claim directories (a
    /// symlink or another user's folder planted there is left alone, with a warning).
    func takeOverAbandoned(includingMine: Bool) -> [String] {
        var workers: [String] = []
        _ = uploads.processing.forEachName { name in
            if !PathBytes.isHidden(name), name != me.id { workers.append(name) }
            return true
        }
        // Our own leftovers first: what is taken over below lands in the same directory.
        var taken: [String] = includingMine ? Self.names(in: claimDirectory) : []
        for worker in workers {
            guard let status = uploads.processing.status(worker) else { continue }
            guard status.kind == .directory, status.owner == geteuid() else {
                logger.warning("not a claim directory of this user in processing/ (a symlink, a file or another user's folder); left alone", metadata: [
                    "snap.file": "\(layout.claims(of: worker))"])
                continue
            }
            guard let directory = try? uploads.processing.subdirectory(worker) else { continue }
            // The directory opened is the one examined (not swapped in between).
            guard let opened = directory.status(), opened.isSame(as: status) else { continue }
            if !Self.isGone(directory, me: me, leaseTimeout: leaseTimeout, logger: logger) { continue }
            taken += takeOver(from: directory, worker: worker)
        }
        return taken
    }

    /// Whether the worker whose claim directory is `processing/<worker>` is gone.
    static func isGone(_ worker: String, in processing: DirectoryHandle, me: WorkerIdentity, leaseTimeout: Double) -> Bool {
        guard let directory = try? processing.subdirectory(worker) else { return false }
        return isGone(directory, me: me, leaseTimeout: leaseTimeout, logger: nil)
    }

    /// A worker on this host is gone when its process is; one elsewhere when its lease
    /// expired. The lease must be a regular file (a symlink or a FIFO in its place is
    /// not read); a claim directory without a readable lease is gone once its own mtime
    /// is older than the lease timeout (a worker that died before writing one).
    static func isGone(_ directory: DirectoryHandle, me: WorkerIdentity, leaseTimeout: Double, logger: Logger?) -> Bool {
        let leaseStatus = directory.status(Lease.fileName)
        if let leaseStatus, leaseStatus.kind != .regular {
            logger?.warning("a claim directory's lease is not a regular file; the directory is left alone", metadata: [
                "snap.file": "\(directory.path)/\(Lease.fileName)"])
            return false
        }
        let beat = leaseStatus?.mtime ?? directory.status()?.mtime ?? 0
        let expired = wallNow() - beat > leaseTimeout
        let lease = directory.readSmallFile(Lease.fileName, limit: leaseLimit).flatMap { try? JSONDecoder().decode(Lease.self, from: Data($0)) }
        if let lease, lease.host == me.host {
            // pid reuse could make a dead worker look alive: the lease's expiry still catches it.
            return !WorkerIdentity.isAlive(pid: lease.pid) || expired
        }
        return expired
    }

    private static func names(in directory: DirectoryHandle) -> [String] {
        var names: [String] = []
        _ = directory.forEachName { name in
            if !PathBytes.isHidden(name) { names.append(name) }
            return names.count < 100_000
        }
        return names
    }

    private func takeOver(from directory: DirectoryHandle, worker: String) -> [String] {
        let names = Self.names(in: directory)
        var taken: [String] = []
        var left = 0
        for name in names {
            let code = directory.moveNoReplace(name, to: claimDirectory, as: name)
            if code == 0 {
                taken.append(name)
                logger.warning("took over the claim of a dead worker; it is processed alone, in a child process", metadata: [
                    "snap.key": "\(UploadName.parse(name).key)", "snap.worker": "\(worker)"])
            } else if code != ENOENT || directory.status(name) != nil {
                // EEXIST: this worker holds an upload of the same name; the next round takes it.
                left += 1
            }
        }
        if left == 0, names.count < 100_000 {
            // Its bookkeeping: the lease, and our temp files if it died writing one
            // (only names of exactly our temp form: `TempFiles.parse`).
            _ = directory.forEachName { name in
                if name == Lease.fileName || TempFiles.parse(name) != nil { directory.unlink(name) }
                return true
            }
            if uploads.processing.holds(worker, directory) { uploads.processing.removeDirectory(worker) }
        }
        return taken
    }
}
