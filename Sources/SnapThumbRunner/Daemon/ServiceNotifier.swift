import Foundation
import Logging
import SnapThumbConfig
import VipsKit
import SystemKit

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

