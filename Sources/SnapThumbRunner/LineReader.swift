import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Reads newline-terminated lines from a pipe.
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    /// Where the next line starts: lines are sliced off without copying the rest
    /// of the buffer each time (a full window of replies arrives in one read).
    private var start = 0
    /// Where to look for the next newline: everything before it was searched.
    private var searched = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line; `beforeBlocking` runs when none is buffered and none is
    /// waiting in the pipe either, before waiting for one.
    func next(beforeBlocking: () -> Void = {}) -> Data? {
        while true {
            if let line = bufferedLine() { return line }
            // The buffer being empty is not enough: the writer usually has the next
            // line in the pipe already (checking only the buffer made the worker's
            // committer sync once per snap).
            if !Self.readable(handle.fileDescriptor) { beforeBlocking() }
            if !fill() { return nil }
        }
    }

    enum Read {
        case line(Data)
        case end
        /// Nothing arrived before the deadline.
        case timedOut
    }

    /// The next line, waiting until `deadline` (uptime nanoseconds; nil: for ever).
    func next(until deadline: UInt64?) -> Read {
        while true {
            if let line = bufferedLine() { return .line(line) }
            if let deadline {
                let now = DispatchTime.now().uptimeNanoseconds
                if now >= deadline { return .timedOut }
                let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
                if !Self.readable(handle.fileDescriptor, waitingMilliseconds: milliseconds) { continue }
            }
            if !fill() { return .end }
        }
    }

    /// A complete line already read, if there is one.
    private func bufferedLine() -> Data? {
        guard let newline = buffer[searched...].firstIndex(of: 0x0A) else {
            searched = buffer.count
            return nil
        }
        let line = Data(buffer[start..<newline])
        start = newline + 1
        if start == buffer.count { buffer.removeAll(keepingCapacity: true); start = 0 }
        searched = start
        return line
    }

    /// Reads what the pipe has (waiting for something); false at end of file.
    private func fill() -> Bool {
        let chunk = handle.availableData
        if chunk.isEmpty { return false }
        if start > 0 { buffer.removeFirst(start); searched -= start; start = 0 }
        buffer.append(contentsOf: chunk)
        return true
    }

    /// Whether a read from `fd` would return at once (data, end of file or an error).
    private static func readable(_ fd: Int32, waitingMilliseconds timeout: Int32 = 0) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, timeout) > 0
    }
}
