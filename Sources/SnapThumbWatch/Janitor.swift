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
        let removed = TempFiles.removeStale(under: root)
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
    /// rename into `done/` sets). Streams the directory.
    func expireDone(in directory: String, retention: Double) {
        guard retention > 0 else { return }
        var expired = 0
        let cutoff = wallNow() - retention
        try? FileOps.forEachName(in: directory) { name in
            let path = "\(directory)/\(name)"
            if !PathBytes.isHidden(name), let status = FileOps.status(path), status.isRegular, status.ctime < cutoff {
                if unlink(path) == 0 { expired += 1 }
            }
            return true
        }
        if expired > 0 { logger.info("expired processed sources from done/", metadata: ["snap.count": .number(expired)]) }
    }
}
