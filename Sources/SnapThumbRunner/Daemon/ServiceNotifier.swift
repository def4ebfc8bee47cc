import Foundation
import Logging
import SnapThumbConfig
import VipsKit
import SystemKit

/// Tells systemd (`Type=notify`) how the worker is doing, through the plain `NOTIFY_SOCKET`
/// datagram protocol: `READY=1` once crash recovery is done and claiming starts, `WATCHDOG=1`
/// every half `WATCHDOG_USEC` while the worker loop is healthy, `STOPPING=1` on SIGTERM.
/// Without `NOTIFY_SOCKET` it sends nothing.
///
/// With a `DaemonHealth` (`--listen`), every notification also goes to it, so the HTTP probes
/// say what systemd is told; and the watchdog ticks without systemd too (every half of
/// `health.watchdogInterval`), so `/healthz` sees the main loop turn on Kubernetes as well.
public struct ServiceNotifier: Sendable {
    /// The socket name (`/run/systemd/notify` or `@abstract`), or nil outside systemd.
    public let socket: String?
    /// How often the service checks its loop and pings (half the watchdog interval), in
    /// seconds, or nil when neither systemd nor a health endpoint watches this process.
    public let watchdogInterval: Double?
    /// The health endpoints' state, when `--listen` serves them.
    public let health: DaemonHealth?

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` (the watchdog is ours only
    /// when WATCHDOG_PID is unset or names this process).
    public init(environment: [String: String], pid: Int32 = ProcessInfo.processInfo.processIdentifier, health: DaemonHealth? = nil) {
        let socket = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        self.socket = socket
        self.health = health
        let systemd = Self.systemdWatchdog(environment: environment, pid: pid)
        watchdogInterval = (systemd ?? health?.watchdogInterval).map { $0 / 2 }
    }

    /// systemd's watchdog interval for this process (`WatchdogSec`), in seconds, or nil when
    /// systemd set none (or set it for another process).
    public static func systemdWatchdog(environment: [String: String], pid: Int32 = ProcessInfo.processInfo.processIdentifier) -> Double? {
        guard let socket = environment["NOTIFY_SOCKET"], !socket.isEmpty,
              let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0,
              environment["WATCHDOG_PID"].map({ Int32($0) == pid }) ?? true else { return nil }
        return Double(usec) / 1_000_000
    }

    /// A notifier that never sends anything.
    public static let none = ServiceNotifier(environment: [:])

    public var isActive: Bool { socket != nil }

    /// Sends one notification; failures are logged, never fatal (systemd may have gone away).
    public func send(_ message: String, logger: Logger) {
        health?.observe(notification: message)
        guard let socket else { return }
        let error = NotifySocket.send(message, to: socket)
        if error != 0 {
            logger.warning("cannot notify systemd", metadata: [
                "snap.socket": "\(socket)", "snap.message": "\(message)", "snap.error": "\(Errno(error))"])
        }
    }
}

