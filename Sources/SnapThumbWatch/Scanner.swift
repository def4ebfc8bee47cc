#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbRunner
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// Full rescans of `incoming/`: at start, when events were lost (queue overflow),
/// periodically as a safety net, and as the only source of news in `--poll` mode.
/// Streams the directory into the bounded `Candidates`, waiting for room, so a
/// backlog of any size costs no more memory than the queue holds.
final class Scanner: Sendable {
    private struct State {
        var requested = false
        var stopped = false
        var interval: Double
    }
    private let monitor: Monitor<State>
    private let finished = DispatchSemaphore(value: 0)

    init(uploads: UploadDirectory, claims: DirectoryHandle, interval: Double, candidates: Candidates, quarantine: Quarantine, worker: String, logger: Logger) {
        let incoming = uploads.incoming
        monitor = Monitor(State(interval: interval))
        let thread = Thread { [self] in
            while let reason = nextScan() {
                var offered = 0
                do {
                    var renamed: [FileName] = []
                    let code = incoming.forEachEntry { entry in
                        let name = entry.escaped
                        guard UploadName.isUpload(name) else { return true }
                        if entry.string == nil { renamed.append(entry); return true }
                        offered += 1
                        return candidates.offerWaiting(name)
                    }
                    if code != 0 { throw SnapError.io("cannot read directory", incoming.path, errno: code) }
                    for entry in renamed {
                        if let name = Self.rename(entry, in: incoming, claims: claims, quarantine: quarantine, worker: worker, logger: logger) {
                            offered += 1
                            if !candidates.offerWaiting(name) { break }
                        }
                    }
                    logger.debug("rescanned incoming/", metadata: ["snap.reason": "\(reason)", "snap.files": .number(offered)])
                } catch {
                    logger.error("cannot rescan incoming/", metadata: ["snap.error": "\(describe(error))"])
                }
            }
            finished.signal()
        }
        thread.name = "snapthumb-scanner"
        thread.start()
    }

    /// A name that is not UTF-8 (Latin-1 from an SMB share, say) is renamed, byte for
    /// byte, to its escaped form (`FileName.escaped`: `caf\xE9.jpg` → `caf%E9.jpg`),
    /// which is its key from then on; the new name is returned. When that form is too
    /// long for a name, the upload is quarantined (`unsafe-name`) instead. When the
    /// escaped name is taken, it waits for a later scan.
    static func rename(_ entry: FileName, in incoming: DirectoryHandle, claims: DirectoryHandle, quarantine: Quarantine, worker: String, logger: Logger) -> String? {
        let key = entry.escaped
        var code = incoming.moveNoReplace(bytes: entry.bytes, to: incoming, as: key)
        if code == 0 {
            logger.notice("renamed an upload whose name is not UTF-8 to its key", metadata: ["snap.key": "\(key)"])
            return key
        }
        if code == EEXIST {
            logger.warning("an upload whose name is not UTF-8 waits: its key is taken in incoming/", metadata: ["snap.key": "\(key)"])
            return nil
        }
        if code == ENAMETOOLONG {
            // Quarantined through this worker's claim directory, under a name that fits.
            let claim = Quarantine.failedName(for: key)
            code = incoming.moveNoReplace(bytes: entry.bytes, to: claims, as: claim)
            if code == 0 {
                let error = SnapError(.unsafeName, "the name is not UTF-8, and written with %XX escapes it is longer than a file name may be")
                if quarantine.quarantine(claim, in: claims, key: key, error: error, attempts: 1, worker: worker) {
                    logger.warning("failed; quarantined in failed/", metadata: ["snap.key": "\(key)", "snap.result": "unsafe-name"])
                }
                return nil
            }
        }
        if code != ENOENT {
            logger.error("cannot rename an upload whose name is not UTF-8", metadata: [
                "snap.key": "\(key)", "snap.error": "\(String(cString: strerror(code)))"])
        }
        return nil
    }

    /// Asks for a rescan as soon as possible (events were lost, or a pause ended).
    func request() {
        monitor.withLock { locked in
            locked.state.requested = true
            locked.broadcast()
        }
    }

    /// Changes the period (polling instead of inotify when inotify is unavailable).
    func setInterval(_ seconds: Double) {
        monitor.withLock { locked in
            locked.state.interval = seconds
            locked.broadcast()
        }
    }

    func stop() {
        monitor.withLock { locked in
            locked.state.stopped = true
            locked.broadcast()
        }
        finished.wait()
    }

    private func nextScan() -> String? {
        monitor.withLock { locked in
            let deadline = monotonicNow() + locked.state.interval
            while !locked.state.stopped && !locked.state.requested {
                if !locked.wait(seconds: deadline - monotonicNow()) { return locked.state.stopped ? nil : "periodic" }
            }
            if locked.state.stopped { return nil }
            locked.state.requested = false
            return "requested"
        }
    }
}
