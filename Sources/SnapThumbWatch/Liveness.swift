import Foundation
import Synchronization

/// Whether the worker loop is healthy, for the watchdog: housekeeping ran recently, and no
/// worker thread has been on one upload far past the image time limit (a stuck thread, e.g.
/// in a hung file-system call, that the image timeout could not stop).
final class Liveness: Sendable {
    private struct State {
        var busySince: [Int: Double] = [:]
        var lastHousekeeping: Double
    }
    private let state: Mutex<State>
    /// A thread on one upload longer than this is stuck.
    let stuckAfter: Double
    /// Housekeeping quieter than this is stuck.
    let housekeepingStaleAfter: Double
    private let now: @Sendable () -> Double

    init(stuckAfter: Double, housekeepingStaleAfter: Double, now: @escaping @Sendable () -> Double = { ProcessInfo.processInfo.systemUptime }) {
        self.stuckAfter = stuckAfter
        self.housekeepingStaleAfter = housekeepingStaleAfter
        self.now = now
        state = Mutex(State(lastHousekeeping: now()))
    }

    func began(worker: Int) { state.withLock { $0.busySince[worker] = now() } }
    func ended(worker: Int) { state.withLock { $0.busySince[worker] = nil } }
    func housekept() { state.withLock { $0.lastHousekeeping = now() } }

    /// nil when healthy, otherwise why not.
    func problem() -> String? {
        state.withLock { state in
            let t = now()
            if t - state.lastHousekeeping > housekeepingStaleAfter {
                return "housekeeping has not run for \(Int(t - state.lastHousekeeping)) s"
            }
            if let (worker, since) = state.busySince.min(by: { $0.value < $1.value }), t - since > stuckAfter {
                return "worker \(worker) has been on one upload for \(Int(t - since)) s"
            }
            return nil
        }
    }
}
