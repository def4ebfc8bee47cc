#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// systemd's notification protocol without libsystemd: one datagram per message to the
/// AF_UNIX socket named by `NOTIFY_SOCKET` (a path, or an abstract name written with a
/// leading '@'). The raw socket calls live here so that nothing above handles a pointer.
public enum NotifySocket {
    /// Sends `message` (e.g. "READY=1") as one datagram to `name`. Returns 0 or an errno value.
    public static func send(_ message: String, to name: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return withAddress(name) { address, length in
            let bytes = Array(message.utf8)
            let sent = bytes.withUnsafeBytes { raw in
                sendto(fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL), address, length)
            }
            return sent < 0 ? errno : 0
        } ?? EINVAL
    }

    /// Calls `body` with a `sockaddr_un` for `name` ('@' = abstract namespace), or returns nil
    /// when the name is empty or too long.
    private static func withAddress(_ name: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32? {
        var path = Array(name.utf8)
        let abstract = path.first == UInt8(ascii: "@")
        if abstract { path[0] = 0 }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path needs room for its terminating NUL; an abstract name does not have one.
        guard !path.isEmpty, path.count <= (abstract ? capacity : capacity - 1) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count + (abstract ? 0 : 1))
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }

    /// The receiving end (what systemd does): a bound datagram socket. Used by the tests
    /// and by anything that supervises `snapthumb watch` without systemd.
    public final class Listener: Sendable {
        private let fd: Int32
        /// The name to put in `NOTIFY_SOCKET`.
        public let name: String

        /// Binds a datagram socket to `name` (a path, or '@' and an abstract name).
        public init(name: String) throws {
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw Errno(errno) }
            let result = NotifySocket.withAddress(name) { address, length in
                bind(fd, address, length) == 0 ? 0 : errno
            } ?? EINVAL
            guard result == 0 else { close(fd); throw Errno(result) }
            self.fd = fd
            self.name = name
        }

        /// The next datagram, or nil if none arrives within `timeout` seconds.
        public func receive(timeout: Double) -> String? {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
                let ready = poll(&poller, 1, left)
                if ready < 0, errno == EINTR { continue }
                guard ready > 0 else { return nil }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n < 0 { if errno == EINTR { continue }; return nil }
                return String(decoding: buffer[..<n], as: UTF8.self)
            }
        }

        deinit {
            close(fd)
            if !name.hasPrefix("@") { unlink(name) }
        }
    }
}
