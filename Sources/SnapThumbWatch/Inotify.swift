#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging

/// Events from `incoming/` via inotify: close-write (written in place) and
/// moved-to (renamed in). Runs on its own thread, blocked in poll(2) when idle.
final class InotifyWatcher: @unchecked Sendable {
    enum Event { case written(String), movedIn(String), overflow }

    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let thread: Thread
    private let finished = DispatchSemaphore(value: 0)

    /// Starts watching `directory`. `simulateOverflow` (tests only) replaces every
    /// batch of events by a queue overflow, to exercise the rescan path.
    init(directory: String, simulateOverflow: Bool = false, logger: Logger, onEvent: @escaping @Sendable (Event) -> Void) throws {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw FileOps.error("inotify is not available for", directory) }
        let mask = UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            let error = FileOps.error("cannot watch", directory)
            close(fd)
            throw error
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            close(fd)
            throw FileOps.error("cannot create a pipe for", directory)
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.fd = fd
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        let (wake, done) = (pipeFDs[0], finished)
        thread = Thread {
            Self.readLoop(fd: fd, wake: wake, simulateOverflow: simulateOverflow, logger: logger, onEvent: onEvent)
            done.signal()
        }
        thread.name = "snapthumb-inotify"
        thread.start()
    }

    /// Stops the reader thread and closes the descriptors.
    func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        finished.wait()
        close(fd)
        close(wakeRead)
        close(wakeWrite)
    }

    private static func readLoop(fd: Int32, wake: Int32, simulateOverflow: Bool, logger: Logger,
                                 onEvent: (Event) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue }; logger.error("inotify poll failed", metadata: ["snap.errno": "\(errno)"]); return }
            if fds[1].revents != 0 { return }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count < 0 { if errno == EINTR || errno == EAGAIN { continue }; onEvent(.overflow); return }
            if simulateOverflow { onEvent(.overflow); continue }
            // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
            var offset = 0
            while offset + 16 <= count {
                let (mask, length) = buffer.withUnsafeBytes { raw in
                    (raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                let nameBytes = buffer[(offset + 16)..<min(count, offset + 16 + length)]
                let name = String(decoding: nameBytes.prefix(while: { $0 != 0 }), as: UTF8.self)
                offset += 16 + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { onEvent(.overflow); continue }
                if name.isEmpty || mask & UInt32(IN_ISDIR) != 0 { continue }
                onEvent(mask & UInt32(IN_MOVED_TO) != 0 ? .movedIn(name) : .written(name))
            }
        }
    }
}
