import Foundation
import Synchronization
import SnapThumbRunner

/// The uploads this worker has claimed and handed to the runner, by the job's id (the
/// runner's `JobID`): each is concluded exactly once (the runner reports every job once).
/// A claim path is in flight at most once.
final class InFlight: Sendable {
    private struct State {
        var jobs: [JobID: Job] = [:]
        /// The claim paths in flight.
        var paths: Set<String> = []
        var counter = 0
        /// Uploads handed back to `incoming/` at the drain deadline.
        var abandoned = 0
    }
    private let state = Mutex(State())
    private let liveness: Liveness?

    init(liveness: Liveness? = nil) { self.liveness = liveness }

    struct Job: Sendable {
        /// Its claim path.
        let path: String
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

    /// Registers a claimed upload as job `id`; false if one with that claim path is in flight already.
    func begin(_ id: JobID, path: String, name: String, key: String, isolated: Bool) -> Bool {
        state.withLock { state in
            guard state.jobs[id] == nil, state.paths.insert(path).inserted else { return false }
            state.counter += 1
            state.jobs[id] = Job(path: path, name: name, key: key, isolated: isolated, started: DispatchTime.now().uptimeNanoseconds, number: state.counter)
            liveness?.began(worker: state.counter)
            return true
        }
    }

    /// Job `id`, no longer in flight; nil if it was not.
    func end(_ id: JobID) -> Job? {
        state.withLock { state in
            let job = state.jobs.removeValue(forKey: id)
            if let job {
                state.paths.remove(job.path)
                liveness?.ended(worker: job.number)
            }
            return job
        }
    }

    /// Uploads handed back to `incoming/` at the drain deadline.
    var abandoned: Int { state.withLock { $0.abandoned } }
    func noteAbandoned() { state.withLock { $0.abandoned += 1 } }

    var count: Int { state.withLock { $0.jobs.count } }
}
