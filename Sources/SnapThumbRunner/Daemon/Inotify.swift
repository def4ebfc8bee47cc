#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit
import Logging
import SnapThumbConfig

/// Events from a directory (watch's `incoming/`) via inotify: close-write (written in
/// place) and moved-to (renamed in); with `created`, also new links (a store publishes a
/// manifest by a rename, or by link(2) where the file system has no RENAME_NOREPLACE;
/// `bench` watches for both). Runs on its own thread, blocked in poll(2) when idle.
public final class InotifyWatcher: Sendable {
    public enum Event { case written(Name), movedIn(Name), created(Name), overflow }

    /// A name from an event: escaped when it is not UTF-8 (no file has that name then).
    public struct Name: Sendable { public let name: String; public let isUTF8: Bool }

    private let fd: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let finished = DispatchSemaphore(value: 0)

    /// Starts watching `directory`. A batch of events for which `overflows` is true
    /// is reported as a queue overflow instead (a test's fault plan exercises the rescan path so).
    public init(directory: String, created: Bool = false, overflows: @escaping @Sendable () -> Bool = { false }, logger: Logger,
                onEvent: @escaping @Sendable (Event) -> Void) throws {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { throw FileOps.error("inotify is not available for", directory) }
        let mask = UInt32(IN_CLOSE_WRITE) | UInt32(IN_MOVED_TO) | UInt32(IN_ONLYDIR) | (created ? UInt32(IN_CREATE) : 0)
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
        let thread = Thread {
            Self.readLoop(fd: fd, wake: wake, overflows: overflows, logger: logger, onEvent: onEvent)
            done.signal()
        }
        thread.name = "snapthumb-inotify"
        thread.start()
    }

    /// Stops the reader thread and closes the descriptors.
    public func stop() {
        _ = POSIX.writeAll(wakeWrite, [1])
        finished.wait()
        close(fd)
        close(wakeRead)
        close(wakeWrite)
    }

    private static func readLoop(fd: Int32, wake: Int32, overflows: () -> Bool, logger: Logger,
                                 onEvent: (Event) -> Void) {
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let n = poll(&fds, 2, -1)
            if n < 0 { if errno == EINTR { continue }; logger.error("inotify poll failed", metadata: ["snap.errno": .number(Int(errno))]); return }
            if fds[1].revents != 0 { return }
            let bytes: [UInt8]
            switch POSIX.read(fd, capacity: 64 * 1024) {
            case .success(let read): bytes = read
            case .failure(let code) where code.code == EINTR || code.code == EAGAIN: continue
            case .failure: onEvent(.overflow); return
            }
            if overflows() { onEvent(.overflow); continue }
            for event in POSIX.inotifyEvents(bytes) {
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { onEvent(.overflow); continue }
                if event.name.isEmpty || event.mask & UInt32(IN_ISDIR) != 0 { continue }
                let name = Name(name: event.name, isUTF8: event.isUTF8)
                onEvent(event.mask & UInt32(IN_MOVED_TO) != 0 ? .movedIn(name)
                        : event.mask & UInt32(IN_CREATE) != 0 ? .created(name) : .written(name))
            }
        }
    }
}
