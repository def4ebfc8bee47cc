import Foundation
import Synchronization

/// What a daemon's `/healthz` and `/readyz` answer (`DaemonEndpoints`), fed by the same
/// notifications systemd gets (`ServiceNotifier.send`): `READY=1` once the start-up checks
/// passed and work starts, `WATCHDOG=1` each time the main loop proved healthy, `STOPPING=1`
/// when draining starts. So the HTTP probes and systemd's watchdog cannot disagree.
///
/// Times are monotonic (seconds since an arbitrary start); a test passes its own clock.
public final class DaemonHealth: Sendable {
    public enum Phase: String, Sendable { case starting, ready, draining }

    /// The main loop is stuck when it has not turned for this long (systemd's `WatchdogSec`, or
    /// 60 s without systemd).
    public let watchdogInterval: Double
    private let now: @Sendable () -> Double
    private let state: Mutex<(phase: Phase, lastTurn: Double)>

    public init(watchdogInterval: Double, now: @escaping @Sendable () -> Double = DaemonHealth.monotonicNow) {
        self.watchdogInterval = watchdogInterval
        self.now = now
        // Start-up counts as a turn: the checks before READY=1 are not a stuck loop.
        state = Mutex((phase: .starting, lastTurn: now()))
    }

    /// Seconds on a monotonic clock (never jumps with the wall clock).
    public static let monotonicNow: @Sendable () -> Double = {
        let elapsed = ContinuousClock.now - processStart
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }
    private static let processStart = ContinuousClock.now

    public var phase: Phase { state.withLock { $0.phase } }

    /// The main loop went round healthy.
    public func loopTurned() { state.withLock { $0.lastTurn = now() } }

    /// The start-up checks passed: work starts.
    public func ready() {
        state.withLock { state in
            if state.phase == .starting { state.phase = .ready }
            state.lastTurn = now()
        }
    }

    /// Draining after SIGTERM: no new work is taken.
    public func draining() { state.withLock { $0.phase = .draining } }

    /// Reads a notification as systemd would (`READY=1`, `WATCHDOG=1`, `STOPPING=1`, one per line).
    public func observe(notification: String) {
        for line in notification.split(separator: "\n") {
            switch line {
            case "READY=1": ready()
            case "WATCHDOG=1": loopTurned()
            case "STOPPING=1": draining()
            default: break
            }
        }
    }

    /// `/healthz`: ok while the main loop turned within the watchdog interval.
    public func liveness() -> (ok: Bool, text: String) {
        let (phase, last) = state.withLock { ($0.phase, $0.lastTurn) }
        let quiet = max(0, now() - last)
        if quiet > watchdogInterval {
            return (false, "stuck: the main loop has not turned for \(Int(quiet)) s (watchdog interval \(Self.seconds(watchdogInterval)) s)\n")
        }
        return (true, "ok: \(phase.rawValue), the main loop turned \(Int(quiet)) s ago\n")
    }

    /// `/readyz`: ok once the start-up checks passed, until draining starts.
    public func readiness() -> (ok: Bool, text: String) {
        switch phase {
        case .starting: return (false, "starting: the start-up checks have not finished\n")
        case .ready: return (true, "ready\n")
        case .draining: return (false, "draining: no new work is taken\n")
        }
    }

    private static func seconds(_ value: Double) -> String {
        value == value.rounded() ? "\(Int(value))" : String(format: "%.1f", value)
    }
}
