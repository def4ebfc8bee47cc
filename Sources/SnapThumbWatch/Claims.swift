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
/// back, and returns the claims of dead workers. Every move is one rename(2), so
/// an upload is always in exactly one place, whatever happens to the process.
struct Claims: Sendable {
    let layout: Layout
    let me: WorkerIdentity
    let leaseTimeout: Double
    let maxAttempts: Int
    let quarantine: Quarantine
    let logger: Logger

    var mine: String { layout.claims(of: me.id) }

    /// Creates this worker's claim directory and its lease.
    func register() throws {
        try FileOps.makeDirectory(mine)
        let lease = Lease(worker: me.id, host: me.host, pid: me.pid)
        let json = try JSONEncoder().encode(lease)
        try FileOps.writeAtomically([UInt8](json), to: "\(mine)/\(Lease.fileName)")
    }

    /// Renews the lease (other hosts reclaim our uploads when it is older than `leaseTimeout`).
    func heartbeat() {
        if !FileOps.touch("\(mine)/\(Lease.fileName)") { try? register() }
    }

    /// Removes the lease and the (then empty) claim directory at a clean exit.
    func unregister() {
        unlink("\(mine)/\(Lease.fileName)")
        rmdir(mine)
    }

    enum ClaimResult { case claimed(String), gone, busy, failed(SnapError) }

    /// Claims `name` from `incoming/`. `.gone` when another worker took it first;
    /// `.busy` while this worker still holds an upload of the same name (a claim
    /// never replaces another).
    func claim(_ name: String) -> ClaimResult {
        let target = "\(mine)/\(name)"
        let code = POSIX.renameNoReplace("\(layout.incoming)/\(name)", target)
        if code == 0 { return .claimed(target) }
        if code == ENOENT { return .gone }
        if code == EEXIST { return .busy }
        errno = code
        return .failed(FileOps.error("cannot claim \(layout.incoming)/\(name) into", target))
    }

    /// After the manifest is published: the source moves to `done/` (or is deleted).
    /// A source already in `done/` under that name is never overwritten: the new
    /// one gets a distinct name (`a~2.jpg`). Returns the name used in `done/`.
    @discardableResult
    func complete(_ name: String, key: String, delete: Bool) throws -> String? {
        let claim = "\(mine)/\(name)"
        if delete {
            guard unlink(claim) == 0 else { throw FileOps.error("cannot delete processed upload", claim) }
            return nil
        }
        return try FileOps.moveWithoutReplacing(claim, into: layout.done, name: key)
    }

    /// Gives a claim back to `incoming/` unchanged (transient failure, or drain timeout).
    func release(_ name: String) {
        if rename("\(mine)/\(name)", "\(layout.incoming)/\(name)") != 0 {
            logger.error("cannot return a claim to incoming/", metadata: [
                "snap.file": "\(mine)/\(name)", "snap.error": "\(String(cString: strerror(errno)))"])
        }
    }

    /// Takes over the claims of workers that are gone: each moves into this worker's
    /// claim directory under its own name and is returned, to be processed as a
    /// suspect (alone, in a child process: see `Processor`). Nothing is counted
    /// against an upload here: a worker that died with uploads in flight may have
    /// been killed from outside (SIGKILL, the OOM killer, a deploy), which says
    /// nothing about them. With `includingMine`, also this worker id's own leftovers
    /// (a restart with the same `--worker-id`).
    func takeOverAbandoned(includingMine: Bool) -> [String] {
        // The claims move into this directory, which may not exist yet at start.
        do { try FileOps.makeDirectory(mine) } catch {
            logger.error("cannot create the claim directory", metadata: ["snap.error": "\(error)"])
            return []
        }
        var workers: [String] = []
        try? FileOps.forEachName(in: layout.processing) { name in
            if !PathBytes.isHidden(name) { workers.append(name) }
            return true
        }
        // Our own leftovers first: what is taken over below lands in the same directory.
        var taken: [String] = includingMine ? names(in: mine) : []
        for worker in workers {
            if worker == me.id { continue }
            if !isGone(worker) { continue }
            taken += takeOver(from: worker)
        }
        return taken
    }
    /// A worker on this host is gone when its process is; one elsewhere when its lease expired.
    func isGone(_ worker: String) -> Bool {
        let directory = layout.claims(of: worker)
        let leasePath = "\(directory)/\(Lease.fileName)"
        let beat = FileOps.status(leasePath)?.mtime ?? FileOps.status(directory)?.mtime ?? 0
        let expired = wallNow() - beat > leaseTimeout
        let lease = FileManager.default.contents(atPath: leasePath).flatMap { try? JSONDecoder().decode(Lease.self, from: $0) }
        if let lease, lease.host == me.host {
            // pid reuse could make a dead worker look alive: the lease's expiry still catches it.
            return !WorkerIdentity.isAlive(pid: lease.pid) || expired
        }
        if lease == nil, let dot = worker.lastIndex(of: "."), String(worker[..<dot]) == me.host,
           let pid = Int32(worker[worker.index(after: dot)...]) {
            return !WorkerIdentity.isAlive(pid: pid) || expired
        }
        return expired
    }

    private func names(in directory: String) -> [String] {
        var names: [String] = []
        try? FileOps.forEachName(in: directory) { name in
            if !PathBytes.isHidden(name) { names.append(name) }
            return names.count < 100_000
        }
        return names
    }

    private func takeOver(from worker: String) -> [String] {
        let directory = layout.claims(of: worker)
        let names = names(in: directory)
        var taken: [String] = []
        var left = 0
        for name in names {
            let code = POSIX.renameNoReplace("\(directory)/\(name)", "\(mine)/\(name)")
            if code == 0 {
                taken.append(name)
                logger.warning("took over the claim of a dead worker; it is processed alone, in a child process", metadata: [
                    "snap.key": "\(UploadName.parse(name).key)", "snap.worker": "\(worker)"])
            } else if code != ENOENT || FileOps.status("\(directory)/\(name)") != nil {
                // EEXIST: this worker holds an upload of the same name; the next round takes it.
                left += 1
            }
        }
        if left == 0, names.count < 100_000 {
            // Its bookkeeping: the lease, and a lease's temp file if it died writing one.
            try? FileOps.forEachName(in: directory) { name in
                if name == Lease.fileName || name.hasPrefix(".tmp-") { unlink("\(directory)/\(name)") }
                return true
            }
            rmdir(directory)
        }
        return taken
    }
}
