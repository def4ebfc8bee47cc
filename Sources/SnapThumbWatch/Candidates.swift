import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SystemKit

/// Names in `incoming/` that may be ready to claim: a bounded queue shared by the
/// event reader, the scanner and the worker threads.
///
/// Memory stays bounded whatever the backlog: at most `capacity` names are held.
/// An event that finds the queue full is dropped and a rescan is requested
/// instead; the scanner waits for room. A name written in place is handed out
/// only once its size and mtime have been stable for `settle` seconds.
final class Candidates: Sendable {
    private let capacity: Int
    private let settle: Double
    private let incoming: DirectoryHandle
    private let monitor = Monitor(State())

    private struct State {
        var ready: [String] = []
        var readyHead = 0
        /// Names waiting to settle, with the last size/mtime seen and when to look again.
        /// (Wall clock, as the mtimes it is compared with.)
        var settling: [String: (status: FileOps.Status?, due: Double)] = [:]
        var members: Set<String> = []
        var stopped = false
        /// Monotonic (`monotonicNow`), as every pause.
        var pausedUntil = 0.0
        /// Claims taken over from dead workers (already in this worker's claim directory).
        var suspects: [String] = []
        /// Names that failed transiently: not handed out again before the time given,
        /// so that one upload that keeps failing does not take every turn (monotonic).
        var heldUntil: [String: Double] = [:]
        /// Transient failures per name so far (its own backoff: 1 s, 2 s, 4 s … 60 s).
        var failures: [String: Int] = [:]
    }

    /// What a worker thread does next.
    enum Work: Equatable {
        /// Claim and process `incoming/<name>`.
        case upload(String)
        /// Process this worker's claim `<name>` alone, in a child process.
        case suspect(String)
    }

    init(incoming: DirectoryHandle, capacity: Int, settle: Double) {
        self.incoming = incoming
        self.capacity = max(16, capacity)
        self.settle = settle
    }

    var count: Int { monitor.withLock { $0.state.members.count } }

    /// Adds a name without waiting. `complete`: it was renamed in, so it needs no settling.
    /// Returns false when the queue is full (the caller should request a rescan).
    func offer(_ name: String, complete: Bool) -> Bool {
        monitor.withLock { add(name, complete: complete, $0) }
    }

    /// Adds a name, waiting for room (the scanner). Returns false once stopped.
    func offerWaiting(_ name: String) -> Bool {
        monitor.withLock { locked in
            while !locked.state.stopped && locked.state.members.count >= capacity && !locked.state.members.contains(name) { locked.wait() }
            return !locked.state.stopped && add(name, complete: false, locked)
        }
    }

    /// Holds `name` back after a transient failure: it returns to `incoming/` and is
    /// not handed out again for 1 s, 2 s, 4 s … 60 s (by its own failures), while
    /// other names take their turns. Call before the name is released.
    func holdBack(_ name: String) {
        monitor.withLock { locked in
            if locked.state.failures.count > 4 * capacity { locked.state.failures.removeAll() }
            let n = locked.state.failures[name, default: 0]
            locked.state.failures[name] = n + 1
            locked.state.heldUntil[name] = monotonicNow() + min(60, Double(1 << min(n, 6)))
        }
    }

    private func add(_ name: String, complete: Bool, _ locked: Monitor<State>.Locked) -> Bool {
        let held = locked.state.heldUntil[name].map { $0 > monotonicNow() } ?? false
        if locked.state.members.contains(name) {
            if complete, !held, locked.state.settling.removeValue(forKey: name) != nil { locked.state.ready.append(name); locked.broadcast() }
            return true
        }
        guard !locked.state.stopped, locked.state.members.count < capacity else { return false }
        locked.state.members.insert(name)
        if let until = locked.state.heldUntil.removeValue(forKey: name), case let left = until - monotonicNow(), left > 0 {
            // It waits its turn among the names settling, whose times are the wall clock's.
            locked.state.settling[name] = (nil, wallNow() + left)
        } else if complete {
            locked.state.ready.append(name)
        } else {
            locked.state.settling[name] = (nil, 0)
        }
        locked.broadcast()
        return true
    }

    /// Queues claims taken over from dead workers.
    func offerSuspects(_ names: [String]) {
        guard !names.isEmpty else { return }
        monitor.withLock { locked in
            locked.state.suspects += names
            locked.broadcast()
        }
    }

    /// The next work; waits while there is none, until `deadline` (`monotonicNow`
    /// seconds). Nil once stopped, or when the deadline passed (see `isStopped`).
    func take(until deadline: Double = .infinity) -> Work? {
        monitor.withLock { locked in
            while true {
                if locked.state.stopped { return nil }
                let now = wallNow(), mono = monotonicNow()
                // Names written in place are looked at on every turn, also while claiming
                // is paused and while other names are ready: they join the ready queue in
                // turn instead of waiting until it is empty, which an upload that keeps
                // coming back would never let happen.
                for (name, entry) in locked.state.settling where entry.due <= now {
                    examine(name, entry.status, now: now, locked)
                }
                if mono < locked.state.pausedUntil {
                    if mono >= deadline { return nil }
                    var wake = min(locked.state.pausedUntil, deadline) - mono
                    for entry in locked.state.settling.values { wake = min(wake, max(entry.due - now, 0.01)) }
                    locked.wait(seconds: wake)
                    continue
                }
                if !locked.state.suspects.isEmpty { return .suspect(locked.state.suspects.removeFirst()) }
                if locked.state.readyHead < locked.state.ready.count {
                    let name = locked.state.ready[locked.state.readyHead]
                    locked.state.readyHead += 1
                    if locked.state.readyHead > 1024, locked.state.readyHead * 2 > locked.state.ready.count {
                        locked.state.ready.removeFirst(locked.state.readyHead)
                        locked.state.readyHead = 0
                    }
                    locked.state.members.remove(name)
                    locked.broadcast()
                    return .upload(name)
                }
                if mono >= deadline { return nil }
                var next = deadline - mono
                for entry in locked.state.settling.values { next = min(next, max(entry.due - now, 0.01)) }
                if next.isFinite {
                    locked.wait(seconds: next)
                } else {
                    locked.wait()
                }
            }
        }
    }

    /// Ready once unchanged since the last look and untouched for `settle` seconds.
    private func examine(_ name: String, _ last: FileOps.Status?, now: Double, _ locked: Monitor<State>.Locked) {
        guard let status = incoming.status(name).map(FileOps.Status.init) else {
            locked.state.settling.removeValue(forKey: name)
            locked.state.members.remove(name)
            return
        }
        let quiet = now - status.mtime
        // Symlinks and directories are handed out too: the processor quarantines them.
        if !status.isRegular || (quiet >= settle && (last == nil || last == status)) {
            locked.state.settling.removeValue(forKey: name)
            locked.state.ready.append(name)
        } else {
            locked.state.settling[name] = (status, max(status.mtime + settle, now + min(settle, 0.25)))
        }
    }

    /// Stops handing out names for `seconds` (backoff after a transient failure).
    func pause(for seconds: Double) {
        monitor.withLock { $0.state.pausedUntil = max($0.state.pausedUntil, monotonicNow() + seconds) }
    }

    var isStopped: Bool { monitor.withLock { $0.state.stopped } }

    /// Wakes every waiter; `take` and `offerWaiting` return at once from now on.
    func stop() {
        monitor.withLock { locked in
            locked.state.stopped = true
            locked.broadcast()
        }
    }
}
