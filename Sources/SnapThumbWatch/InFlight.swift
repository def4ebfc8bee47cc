import Foundation
import Synchronization

/// The uploads this worker has claimed and handed to the runner, by claim path:
/// each is concluded exactly once (the runner reports every job once).
final class InFlight: Sendable {
    private struct State {
        var jobs: [String: Job] = [:]
        var counter = 0
        /// Uploads handed back to `incoming/` at the drain deadline.
        var abandoned = 0
    }
    private let state = Mutex(State())
    private let liveness: Liveness?

    init(liveness: Liveness? = nil) { self.liveness = liveness }

    struct Job: Sendable {
        /// The name in `incoming/` and in the claim directory.
        let name: String
        let key: String
        /// Taken over from a dead worker.
        let isolated: Bool
        /// When it was claimed (uptime nanoseconds).
        let started: UInt64
        /// Its number, for the watchdog's liveness.
        let number: Int
    }

    /// Registers a claimed upload; false if one with that claim path is in flight already.
    func begin(_ path: String, name: String, key: String, isolated: Bool) -> Bool {
        state.withLock { state in
            guard state.jobs[path] == nil else { return false }
            state.counter += 1
            state.jobs[path] = Job(name: name, key: key, isolated: isolated, started: DispatchTime.now().uptimeNanoseconds, number: state.counter)
            liveness?.began(worker: state.counter)
            return true
        }
    }

    /// The upload at `path`, no longer in flight; nil if it was not.
    func end(_ path: String) -> Job? {
        state.withLock { state in
            let job = state.jobs.removeValue(forKey: path)
            if let job { liveness?.ended(worker: job.number) }
            return job
        }
    }

    /// Uploads handed back to `incoming/` at the drain deadline.
    var abandoned: Int { state.withLock { $0.abandoned } }
    func noteAbandoned() { state.withLock { $0.abandoned += 1 } }

    var count: Int { state.withLock { $0.jobs.count } }
}
