import Foundation
import Logging

/// Full rescans of `incoming/`: at start, when events were lost (queue overflow),
/// periodically as a safety net, and as the only source of news in `--poll` mode.
/// Streams the directory into the bounded `Candidates`, waiting for room, so a
/// backlog of any size costs no more memory than the queue holds.
final class Scanner: @unchecked Sendable {
    private let condition = NSCondition()
    private var requested = false
    private var stopped = false
    private var interval: Double
    private let finished = DispatchSemaphore(value: 0)

    init(incoming: String, interval: Double, candidates: Candidates, logger: Logger) {
        self.interval = interval
        let thread = Thread { [self] in
            while let reason = nextScan() {
                var offered = 0
                do {
                    try FileOps.forEachName(in: incoming) { name in
                        guard UploadName.isUpload(name) else { return true }
                        offered += 1
                        return candidates.offerWaiting(name)
                    }
                    logger.debug("rescanned incoming/", metadata: ["snap.reason": "\(reason)", "snap.files": "\(offered)"])
                } catch {
                    logger.error("cannot rescan incoming/", metadata: ["snap.error": "\(error)"])
                }
            }
            finished.signal()
        }
        thread.name = "snapthumb-scanner"
        thread.start()
    }

    /// Asks for a rescan as soon as possible (events were lost, or a pause ended).
    func request() {
        condition.lock()
        requested = true
        condition.signal()
        condition.unlock()
    }

    /// Changes the period (polling instead of inotify when inotify is unavailable).
    func setInterval(_ seconds: Double) {
        condition.lock()
        interval = seconds
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
        finished.wait()
    }

    private func nextScan() -> String? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(interval)
        while !stopped && !requested {
            if !condition.wait(until: deadline) { return stopped ? nil : "periodic" }
        }
        if stopped { return nil }
        requested = false
        return "requested"
    }
}
