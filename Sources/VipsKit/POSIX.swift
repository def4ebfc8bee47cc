internal import CSnapShim
#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The POSIX calls that take raw buffers, wrapped so that no module above this
/// one handles a pointer. Failures come back as `errno` values: the callers
/// turn them into domain errors that name the path and what was being done.
/// An `errno` value from a failed call.
public struct Errno: Error, Sendable, Equatable {
    public let code: Int32
    public init(_ code: Int32) { self.code = code }
}

public enum POSIX {
    /// Makes the kernel kill this process when its parent dies, so that worker
    /// processes never outlive the run that started them. Returns false if the
    /// parent is already gone.
    public static func dieWithParent() -> Bool { snap_die_with_parent() == 0 }

    /// Fixes glibc's mmap threshold at its default of 128 KiB. Left dynamic, the
    /// threshold rises to the size of the largest mmapped block ever freed (a 12 MP
    /// input is 3–6 MB), after which such buffers come from the heap and leave it
    /// fragmented: a worker's peak RSS then kept creeping up (+5 to +17 % after the
    /// first tenth of 100 originals; +3 % with the threshold fixed, and 10 % smaller).
    public static func fixMallocMmapThreshold() { snap_fix_mmap_threshold(128 * 1024) }

    /// Writes every byte, retrying on EINTR. Returns 0 or an errno value.
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return 0
        }
    }

    /// One `read(2)` of at most `capacity` bytes: the bytes (empty at end of
    /// file), or an errno value (EINTR is retried).
    public static func read(_ fd: Int32, capacity: Int) -> Result<[UInt8], Errno> {
        var buffer = [UInt8](repeating: 0, count: capacity)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress!, $0.count) }
            if n >= 0 {
                buffer.removeSubrange(n...)
                return .success(buffer)
            }
            if errno == EINTR { continue }
            return .failure(Errno(errno))
        }
    }

    /// Reads exactly `count` bytes from `fd` into a new `SourceBuffer`.
    /// Fails with the errno value, or EIO if the file ends early.
    public static func readSource(_ fd: Int32, count: Int) -> Result<SourceBuffer, Errno> {
        var failure: Errno?
        let buffer = SourceBuffer(count: count) { target in
            var done = 0
            while done < count {
                let n = Glibc.read(fd, target.baseAddress! + done, count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = Errno(errno)
                    return
                }
                if n == 0 { failure = Errno(EIO); return }
                done += n
            }
        }
        if let failure { return .failure(failure) }
        return .success(buffer)
    }

    /// Calls `body` with each name in a directory (`.` and `..` left out), as
    /// it is read; `body` returns false to stop. Fails with the errno value.
    public static func forEachName(in directory: String, _ body: (String) -> Bool) -> Int32 {
        guard let handle = opendir(directory) else { return errno }
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            if !body(name) { break }
        }
        return 0
    }

    /// One inotify event.
    public struct InotifyEvent: Sendable, Equatable {
        public let mask: UInt32
        public let name: String
    }

    /// Splits what one `read(2)` of an inotify descriptor returned into events.
    /// (struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; })
    public static func inotifyEvents(_ bytes: [UInt8]) -> [InotifyEvent] {
        var events: [InotifyEvent] = []
        var offset = 0
        while offset + 16 <= bytes.count {
            let (mask, length) = bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self),
                 Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self)))
            }
            let nameBytes = bytes[(offset + 16)..<min(bytes.count, offset + 16 + length)]
            events.append(InotifyEvent(mask: mask, name: String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)))
            offset += 16 + length
        }
        return events
    }
}

/// Which CPUs this process's threads may run on (`sched_setaffinity`), for
/// benchmarks that measure a run at N jobs on N CPUs.
public enum CPUAffinity {
    /// The CPUs the calling thread may run on, in ascending order.
    public static func allowed() -> [Int] {
        var flags = [UInt8](repeating: 0, count: 1024)
        let n = flags.withUnsafeMutableBufferPointer { snap_get_affinity(0, $0.baseAddress, Int32($0.count)) }
        guard n > 0 else { return [] }
        return (0..<Int(n)).filter { flags[$0] != 0 }
    }

    /// Confines every thread of this process to `cpus`; threads and processes it
    /// starts afterwards inherit that. Returns 0 or the first errno value.
    public static func confine(to cpus: [Int]) -> Int32 {
        var flags = [UInt8](repeating: 0, count: (cpus.max() ?? 0) + 1)
        for cpu in cpus where cpu >= 0 { flags[cpu] = 1 }
        var failure: Int32 = 0
        // A thread started while this walks /proc/self/task inherits its creator's
        // set, which is either already changed or is changed later in the walk.
        for tid in threads() {
            let code = flags.withUnsafeBufferPointer { snap_set_affinity(tid, $0.baseAddress, Int32($0.count)) }
            let error = errno
            if code != 0, error != ESRCH, failure == 0 { failure = error }
        }
        return failure
    }

    private static func threads() -> [Int32] {
        var tids: [Int32] = []
        _ = POSIX.forEachName(in: "/proc/self/task") { name in
            if let tid = Int32(name) { tids.append(tid) }
            return true
        }
        return tids
    }
}
