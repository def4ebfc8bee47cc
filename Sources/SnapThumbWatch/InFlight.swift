import Foundation
import VipsKit

/// The uploads this worker is processing right now. At the drain deadline the
/// service releases them; a job that finishes afterwards must then leave the
/// upload where the release put it, so every final move happens under this lock.
final class InFlight: @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [String: Job] = [:]
    private var released = false

    final class Job: @unchecked Sendable {
        var image: (any Killable)?
        var timedOut = false
    }

    /// Registers a claimed upload; nil when the worker is already releasing everything.
    func begin(_ name: String) -> Job? {
        lock.lock()
        defer { lock.unlock() }
        guard !released else { return nil }
        let job = Job()
        jobs[name] = job
        return job
    }

    func setImage(_ image: any Killable, for job: Job) {
        lock.lock()
        job.image = image
        if job.timedOut { image.kill() }
        lock.unlock()
    }

    /// Per-image time limit: cancels the decode (libjpeg's kill flag or `vips_image_set_kill`).
    func expire(_ job: Job) {
        lock.lock()
        defer { lock.unlock() }
        guard jobs.values.contains(where: { $0 === job }) else { return }
        job.timedOut = true
        job.image?.kill()
    }

    /// Whether `job` is still running (not finished, not released).
    func isRunning(_ job: Job) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return jobs.values.contains { $0 === job }
    }

    /// A wedged worker's last act: every other claim goes back to `incoming/` unchanged,
    /// while `stuck` stays claimed so that the restarted worker counts an attempt against it.
    func releaseAll(except stuck: Job, _ release: (String) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        released = true
        for (name, job) in jobs where job !== stuck { release(name) }
        jobs = jobs.filter { $0.value === stuck }
    }

    func timedOut(_ job: Job) -> Bool { lock.lock(); defer { lock.unlock() }; return job.timedOut }

    /// Runs the job's final move unless its claim was released meanwhile. Returns false if released.
    func finish(_ name: String, _ move: () -> Void) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard let job = jobs.removeValue(forKey: name) else { return false }
        // The time-limit timer keeps the job until it fires: drop the image (and its bytes) now.
        job.image = nil
        move()
        return true
    }

    /// Drain deadline: cancels every running image and hands back the names to release.
    func releaseAll(_ release: (String) -> Void) -> Int {
        lock.lock()
        defer { lock.unlock() }
        released = true
        for (name, job) in jobs {
            job.image?.kill()
            job.image = nil
            release(name)
        }
        let count = jobs.count
        jobs.removeAll()
        return count
    }

    var count: Int { lock.lock(); defer { lock.unlock() }; return jobs.count }
}
