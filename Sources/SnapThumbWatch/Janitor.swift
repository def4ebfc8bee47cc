#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SystemKit
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore

/// Cleans up after processes that died: temp files they left in the store and in
/// `failed/`, and sources in `done/` past their retention.
struct Janitor: Sendable {
    let logger: Logger

    /// Removes SnapThumb's own temp files (`.tmp-<pid>-<n>-<name>`, see `TempFiles`)
    /// under `root`, a folder SnapThumb owns (the store, `failed/`), whose process is
    /// gone from this host or that are over a day old. Returns how many were removed.
    @discardableResult
    func removeStaleTemporaries(under root: String) -> Int {
        report(TempFiles.removeStale(under: root), in: root)
    }

    /// The same in a folder held open (`failed/`).
    @discardableResult
    func removeStaleTemporaries(in directory: DirectoryHandle) -> Int {
        report(TempFiles.removeStale(in: directory), in: directory.path)
    }

    private func report(_ removed: Int, in root: String) -> Int {
        if removed > 0 { logger.notice("removed temp files left by dead processes", metadata: ["snap.dir": "\(root)", "snap.count": .number(removed)]) }
        return removed
    }

    /// Removes only the metrics file's own stale temp names from its directory
    /// (not recursively: node_exporter's textfile directory or /tmp is shared).
    func removeStaleTemporaries(of metricsFile: String) {
        let removed = TempFiles.removeStale(of: metricsFile)
        if removed > 0 { logger.notice("removed metrics temp files left by dead processes", metadata: ["snap.file": "\(metricsFile)", "snap.count": .number(removed)]) }
    }

    /// Deletes sources in `done/` older than `retention` seconds (by ctime, which the
    /// rename into `done/` sets). Streams the folder held open; only regular files go.
    func expireDone(in directory: DirectoryHandle, retention: Double) {
        guard retention > 0 else { return }
        var expired = 0
        let cutoff = wallNow() - retention
        _ = directory.forEachName { name in
            if !PathBytes.isHidden(name), let status = directory.status(name), status.kind == .regular, status.ctime < cutoff {
                if directory.unlink(name) == 0 { expired += 1 }
            }
            return true
        }
        if expired > 0 { logger.info("expired processed sources from done/", metadata: ["snap.count": .number(expired)]) }
    }
}
