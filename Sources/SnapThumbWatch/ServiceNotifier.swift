import Foundation
import Logging
import VipsKit

/// Tells systemd (`Type=notify`) how the worker is doing, through the plain `NOTIFY_SOCKET`
/// datagram protocol: `READY=1` once crash recovery is done and claiming starts, `WATCHDOG=1`
/// every half `WATCHDOG_USEC` while the worker loop is healthy, `STOPPING=1` on SIGTERM.
/// Without `NOTIFY_SOCKET` it does nothing.
public struct ServiceNotifier: Sendable {
    /// The socket name (`/run/systemd/notify` or `@abstract`), or nil outside systemd.
    public let socket: String?
    /// Half the watchdog interval, in seconds, or nil when systemd set no watchdog for this process.
    public let watchdogInterval: Double?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` (the watchdog is ours only
    /// when WATCHDOG_PID is unset or names this process).
    public init(environment: [String: String], pid: Int32 = ProcessInfo.processInfo.processIdentifier) {
        let socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        self.socket = socket
        var interval: Double?
        if socket != nil, let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 {
            if environment["WATCHDOG_PID"].map({ Int32($0) == pid }) ?? true {
                interval = Double(usec) / 2_000_000
            }
        }
        watchdogInterval = interval
    }

    /// A notifier that never sends anything.
    public static let none = ServiceNotifier(environment: [:])

    public var isActive: Bool { socket != nil }

    /// Sends one notification; failures are logged, never fatal (systemd may have gone away).
    public func send(_ message: String, logger: Logger) {
        guard let socket else { return }
        let error = NotifySocket.send(message, to: socket)
        if error != 0 {
            logger.warning("cannot notify systemd", metadata: [
                "snap.socket": "\(socket)", "snap.message": "\(message)", "snap.error": "\(Errno(error))"])
        }
    }
}

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
