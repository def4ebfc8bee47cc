import Foundation

/// The uploads this worker has claimed and handed to the runner, by claim path:
/// each is concluded exactly once (the runner reports every job once).
final class InFlight: @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [String: Job] = [:]
    private var counter = 0
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
        lock.lock()
        defer { lock.unlock() }
        guard jobs[path] == nil else { return false }
        counter += 1
        jobs[path] = Job(name: name, key: key, isolated: isolated, started: DispatchTime.now().uptimeNanoseconds, number: counter)
        liveness?.began(worker: counter)
        return true
    }

    /// The upload at `path`, no longer in flight; nil if it was not.
    func end(_ path: String) -> Job? {
        lock.lock()
        defer { lock.unlock() }
        let job = jobs.removeValue(forKey: path)
        if let job { liveness?.ended(worker: job.number) }
        return job
    }

    /// Uploads handed back to `incoming/` at the drain deadline.
    var abandoned: Int { lock.lock(); defer { lock.unlock() }; return abandonedCount }
    private var abandonedCount = 0
    func noteAbandoned() { lock.lock(); abandonedCount += 1; lock.unlock() }

    var count: Int { lock.lock(); defer { lock.unlock() }; return jobs.count }
}
