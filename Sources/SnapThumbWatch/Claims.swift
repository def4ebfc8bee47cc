#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbCore

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

    enum ClaimResult { case claimed(String), gone, failed(SnapError) }

    /// Claims `name` from `incoming/`. `.gone` when another worker took it first.
    func claim(_ name: String) -> ClaimResult {
        let target = "\(mine)/\(name)"
        if rename("\(layout.incoming)/\(name)", target) == 0 { return .claimed(target) }
        if errno == ENOENT { return .gone }
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

    /// Returns the claims of workers that are gone to `incoming/`, counting the attempt
    /// in the name; an upload that has now stalled or crashed `maxAttempts` workers is
    /// quarantined as `poison`. With `includingMine`, also this worker id's own leftovers
    /// (a restart with the same `--worker-id`). Returns how many uploads were recovered.
    @discardableResult
    func recoverAbandoned(includingMine: Bool) -> Int {
        var workers: [String] = []
        try? FileOps.forEachName(in: layout.processing) { name in
            if !name.hasPrefix(".") { workers.append(name) }
            return true
        }
        var recovered = 0
        for worker in workers {
            if worker == me.id && !includingMine { continue }
            if worker != me.id && !isGone(worker) { continue }
            recovered += recoverClaims(of: worker)
        }
        return recovered
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

    private func recoverClaims(of worker: String) -> Int {
        let directory = layout.claims(of: worker)
        var names: [String] = []
        try? FileOps.forEachName(in: directory) { name in
            if !name.hasPrefix(".") { names.append(name) }
            return names.count < 100_000
        }
        var recovered = 0
        for name in names {
            let (key, attempts) = UploadName.parse(name)
            let source = "\(directory)/\(name)"
            if attempts + 1 >= maxAttempts {
                let error = SnapError(.poison, "this upload stopped \(attempts + 1) workers (crash or stall) while being processed; it is quarantined so that it cannot stop more")
                if quarantine.quarantine(claim: source, key: key, error: error, attempts: attempts + 1, worker: worker) {
                    recovered += 1
                }
                continue
            }
            let target = "\(layout.incoming)/\(UploadName.with(key: key, attempts: attempts + 1))"
            if rename(source, target) == 0 {
                recovered += 1
                logger.warning("returned the claim of a dead worker to incoming/", metadata: [
                    "snap.key": "\(key)", "snap.worker": "\(worker)", "snap.attempts": "\(attempts + 1)"])
            }
        }
        if names.count < 100_000 {
            // Its bookkeeping: the lease, and a lease's temp file if it died writing one.
            try? FileOps.forEachName(in: directory) { name in
                if name == Lease.fileName || name.hasPrefix(".tmp-") { unlink("\(directory)/\(name)") }
                return true
            }
            rmdir(directory)
        }
        return recovered
    }
}
