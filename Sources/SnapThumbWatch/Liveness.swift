import Foundation

/// Whether the worker loop is healthy, for the watchdog: housekeeping ran recently, and no
/// worker thread has been on one upload far past the image time limit (a stuck thread, e.g.
/// in a hung file-system call, that the image timeout could not stop).
final class Liveness: @unchecked Sendable {
    private let lock = NSLock()
    private var busySince: [Int: Double] = [:]
    private var lastHousekeeping: Double
    /// A thread on one upload longer than this is stuck.
    let stuckAfter: Double
    /// Housekeeping quieter than this is stuck.
    let housekeepingStaleAfter: Double
    private let now: @Sendable () -> Double

    init(stuckAfter: Double, housekeepingStaleAfter: Double, now: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.stuckAfter = stuckAfter
        self.housekeepingStaleAfter = housekeepingStaleAfter
        self.now = now
        lastHousekeeping = now()
    }

    func began(worker: Int) { lock.lock(); busySince[worker] = now(); lock.unlock() }
    func ended(worker: Int) { lock.lock(); busySince[worker] = nil; lock.unlock() }
    func housekept() { lock.lock(); lastHousekeeping = now(); lock.unlock() }

    /// nil when healthy, otherwise why not.
    func problem() -> String? {
        lock.lock()
        defer { lock.unlock() }
        let t = now()
        if t - lastHousekeeping > housekeepingStaleAfter {
            return "housekeeping has not run for \(Int(t - lastHousekeeping)) s"
        }
        if let (worker, since) = busySince.min(by: { $0.value < $1.value }), t - since > stuckAfter {
            return "worker \(worker) has been on one upload for \(Int(t - since)) s"
        }
        return nil
    }
}
