import Foundation
import SnapThumbCore
import SnapThumbStore

/// Names in `incoming/` that may be ready to claim: a bounded queue shared by the
/// event reader, the scanner and the worker threads.
///
/// Memory stays bounded whatever the backlog: at most `capacity` names are held.
/// An event that finds the queue full is dropped and a rescan is requested
/// instead; the scanner waits for room. A name written in place is handed out
/// only once its size and mtime have been stable for `settle` seconds.
final class Candidates: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    private let settle: Double
    private let incoming: String
    private var ready: [String] = []
    private var readyHead = 0
    /// Names waiting to settle, with the last size/mtime seen and when to look again.
    private var settling: [String: (status: FileOps.Status?, due: Double)] = [:]
    private var members: Set<String> = []
    private var stopped = false
    private var pausedUntil = 0.0
    /// Claims taken over from dead workers (already in this worker's claim directory).
    private var suspects: [String] = []
    /// Names that failed transiently: not handed out again before the time given,
    /// so that one upload that keeps failing does not take every turn.
    private var heldUntil: [String: Double] = [:]
    /// Transient failures per name so far (its own backoff: 1 s, 2 s, 4 s … 60 s).
    private var failures: [String: Int] = [:]

    /// What a worker thread does next.
    enum Work: Equatable {
        /// Claim and process `incoming/<name>`.
        case upload(String)
        /// Process this worker's claim `<name>` alone, in a child process.
        case suspect(String)
    }

    init(incoming: String, capacity: Int, settle: Double) {
        self.incoming = incoming
        self.capacity = max(16, capacity)
        self.settle = settle
    }

    var count: Int { condition.lock(); defer { condition.unlock() }; return members.count }

    /// Adds a name without waiting. `complete`: it was renamed in, so it needs no settling.
    /// Returns false when the queue is full (the caller should request a rescan).
    func offer(_ name: String, complete: Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return add(name, complete: complete)
    }

    /// Adds a name, waiting for room (the scanner). Returns false once stopped.
    func offerWaiting(_ name: String) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !stopped && members.count >= capacity && !members.contains(name) { condition.wait() }
        return !stopped && add(name, complete: false)
    }

    /// Holds `name` back after a transient failure: it returns to `incoming/` and is
    /// not handed out again for 1 s, 2 s, 4 s … 60 s (by its own failures), while
    /// other names take their turns. Call before the name is released.
    func holdBack(_ name: String) {
        condition.lock()
        defer { condition.unlock() }
        if failures.count > 4 * capacity { failures.removeAll() }
        let n = failures[name, default: 0]
        failures[name] = n + 1
        heldUntil[name] = wallNow() + min(60, Double(1 << min(n, 6)))
    }

    private func add(_ name: String, complete: Bool) -> Bool {
        let held = heldUntil[name].map { $0 > wallNow() } ?? false
        if members.contains(name) {
            if complete, !held, settling.removeValue(forKey: name) != nil { ready.append(name); condition.broadcast() }
            return true
        }
        guard !stopped, members.count < capacity else { return false }
        members.insert(name)
        if let until = heldUntil.removeValue(forKey: name), until > wallNow() {
            settling[name] = (nil, until)
        } else if complete {
            ready.append(name)
        } else {
            settling[name] = (nil, 0)
        }
        condition.broadcast()
        return true
    }

    /// Queues claims taken over from dead workers.
    func offerSuspects(_ names: [String]) {
        guard !names.isEmpty else { return }
        condition.lock()
        suspects += names
        condition.broadcast()
        condition.unlock()
    }

    /// The next work; waits while there is none, until `deadline` (wall-clock
    /// seconds). Nil once stopped, or when the deadline passed (see `isStopped`).
    func take(until deadline: Double = .infinity) -> Work? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if stopped { return nil }
            let now = wallNow()
            // Names written in place are looked at on every turn, also while claiming
            // is paused and while other names are ready: they join the ready queue in
            // turn instead of waiting until it is empty, which an upload that keeps
            // coming back would never let happen.
            for (name, entry) in settling where entry.due <= now {
                examine(name, entry.status, now: now)
            }
            if now < pausedUntil {
                if now >= deadline { return nil }
                var wake = min(pausedUntil, deadline)
                for entry in settling.values { wake = min(wake, max(entry.due, now + 0.01)) }
                _ = condition.wait(until: Date(timeIntervalSince1970: wake))
                continue
            }
            if !suspects.isEmpty { return .suspect(suspects.removeFirst()) }
            if readyHead < ready.count {
                let name = ready[readyHead]
                readyHead += 1
                if readyHead > 1024, readyHead * 2 > ready.count {
                    ready.removeFirst(readyHead)
                    readyHead = 0
                }
                members.remove(name)
                condition.broadcast()
                return .upload(name)
            }
            if now >= deadline { return nil }
            var next = deadline
            for entry in settling.values { next = min(next, max(entry.due, now + 0.01)) }
            if next.isFinite {
                _ = condition.wait(until: Date(timeIntervalSince1970: next))
            } else {
                condition.wait()
            }
        }
    }

    /// Ready once unchanged since the last look and untouched for `settle` seconds.
    private func examine(_ name: String, _ last: FileOps.Status?, now: Double) {
        guard let status = FileOps.status("\(incoming)/\(name)") else {
            settling.removeValue(forKey: name)
            members.remove(name)
            return
        }
        let quiet = now - status.mtime
        // Symlinks and directories are handed out too: the processor quarantines them.
        if !status.isRegular || (quiet >= settle && (last == nil || last == status)) {
            settling.removeValue(forKey: name)
            ready.append(name)
        } else {
            settling[name] = (status, max(status.mtime + settle, now + min(settle, 0.25)))
        }
    }

    /// Stops handing out names for `seconds` (backoff after a transient failure).
    func pause(for seconds: Double) {
        condition.lock()
        pausedUntil = max(pausedUntil, wallNow() + seconds)
        condition.unlock()
    }

    var isStopped: Bool { condition.lock(); defer { condition.unlock() }; return stopped }

    /// Wakes every waiter; `take` and `offerWaiting` return at once from now on.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }
}
