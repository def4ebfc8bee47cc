#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging

/// Cleans up after processes that died: temp files they left in the store and in
/// `failed/`, and sources in `done/` past their retention.
struct Janitor: Sendable {
    let logger: Logger

    /// Removes `.tmp-<pid>-…` files (the store's and the watcher's temp names) under
    /// `root` whose process is gone from this host, or that are over a day old (a
    /// temp file is only ever open for milliseconds). Returns how many were removed.
    @discardableResult
    func removeStaleTemporaries(under root: String) -> Int {
        var removed = 0
        var directories = [root]
        while let directory = directories.popLast() {
            try? FileOps.forEachName(in: directory) { name in
                let path = "\(directory)/\(name)"
                if name.hasPrefix(".tmp-") {
                    if isStale(name, path), unlink(path) == 0 { removed += 1 }
                } else if !name.hasPrefix("."), FileOps.status(path)?.isDirectory == true {
                    directories.append(path)
                }
                return true
            }
        }
        if removed > 0 { logger.notice("removed temp files left by dead processes", metadata: ["snap.dir": "\(root)", "snap.count": "\(removed)"]) }
        return removed
    }

    private func isStale(_ name: String, _ path: String) -> Bool {
        let pidText = name.dropFirst(".tmp-".count).prefix(while: { $0 != "-" })
        if let pid = Int32(pidText), pid != getpid(), !WorkerIdentity.isAlive(pid: pid) { return true }
        guard let status = FileOps.status(path) else { return false }
        return wallNow() - status.mtime > 86_400
    }

    /// Deletes sources in `done/` older than `retention` seconds (by ctime, which the
    /// rename into `done/` sets). Streams the directory.
    func expireDone(in directory: String, retention: Double) {
        guard retention > 0 else { return }
        var expired = 0
        let cutoff = wallNow() - retention
        try? FileOps.forEachName(in: directory) { name in
            let path = "\(directory)/\(name)"
            if !name.hasPrefix("."), let status = FileOps.status(path), status.isRegular, status.ctime < cutoff {
                if unlink(path) == 0 { expired += 1 }
            }
            return true
        }
        if expired > 0 { logger.info("expired processed sources from done/", metadata: ["snap.count": "\(expired)"]) }
    }
}
