internal import CSystemShim
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

    /// Fixes glibc's mmap threshold at 1 MiB and its trim threshold at 8 MiB. Left
    /// dynamic, the threshold rises to the size of the largest mmapped block ever
    /// freed (a 12 MP input is 3–6 MB), after which such buffers come from the heap
    /// and leave it fragmented: a worker's peak RSS then kept creeping up (+5 to +17 %
    /// after the first tenth of 100 originals). At glibc's default of 128 KiB, every
    /// snap-sized buffer (a 1/4-scale decode is ~290 KB, libjpeg's pools) was mmapped
    /// and unmapped per image: 155 page faults an image, ~10 % of a worker's CPU.
    /// At 1 MiB they are reused from the heap (16 faults an image); inputs of
    /// several MB stay mmapped, so the heap does not fragment as before.
    public static func fixMallocMmapThreshold() { snap_fix_mmap_threshold(1 << 20, 8 << 20) }

    /// Ends the process with `status` once C's output streams are flushed, without running
    /// atexit handlers or the loaded libraries' destructors. By then everything SnapThumb
    /// owes is written and synced (stores, reports, logs); what `exit` would add is the
    /// libraries' teardown while other threads still live (Dispatch's, a daemon's). In CI a
    /// `consume` that had drained cleanly after SIGTERM died of SIGABRT there, with one of its
    /// threads in libldap's code (loaded with libcurl; libldap's exit-time destructor
    /// `ldap_int_destroy_global_options` is known to crash at exit: ClickHouse issue 43933).
    public static func exitNow(_ status: Int32) -> Never {
        fflush(nil)
        _exit(status)
    }

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
    /// it is read, in its escaped form (see `FileName.escaped`); `body` returns
    /// false to stop. Fails with the errno value.
    public static func forEachName(in directory: String, _ body: (String) -> Bool) -> Int32 {
        forEachEntry(in: directory) { body($0.escaped) }
    }

    /// Calls `body` with each name in a directory (`.` and `..` left out), byte
    /// for byte as the file system holds it; `body` returns false to stop. Fails
    /// with the errno value.
    ///
    /// A directory record is only as long as its `d_reclen`: the name is read
    /// through a pointer, up to its NUL and never past the record (reading
    /// `d_name` as the 256-byte array it is declared as reads past the end of
    /// the last record in glibc's buffer).
    public static func forEachEntry(in directory: String, _ body: (FileName) -> Bool) -> Int32 {
        forEachEntry(inBytes: Array(directory.utf8), body)
    }

    /// `forEachEntry` for a directory at a byte-exact path.
    public static func forEachEntry(inBytes directory: [UInt8], _ body: (FileName) -> Bool) -> Int32 {
        guard let handle = withCPath(directory, { opendir($0) }) else { return errno }
        defer { closedir(handle) }
        return readEntries(handle, body)
    }

    /// The entries of an open directory stream, as `forEachEntry` gives them. Returns 0.
    static func readEntries(_ handle: OpaquePointer, _ body: (FileName) -> Bool) -> Int32 {
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(handle) {
            let record = Int(entry.pointee.d_reclen)
            let room = max(0, record - nameOffset)
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).withMemoryRebound(to: CChar.self, capacity: room) {
                FileName(bytes: Array(UnsafeRawBufferPointer(start: $0, count: strnlen($0, room))))
            }
            if name.bytes == [0x2E] || name.bytes == [0x2E, 0x2E] || name.bytes.isEmpty { continue }
            if !body(name) { break }
        }
        return 0
    }

    /// Moves `from` to `to` unless something is already at `to` (then EEXIST).
    /// Returns 0 or an errno value.
    public static func renameNoReplace(_ from: String, _ to: String) -> Int32 {
        snap_rename_noreplace(from, to) == 0 ? 0 : errno
    }

    /// Moves `from` (in the directory open as `fromDirectory`) to `to` (in `toDirectory`) only
    /// by renameat2's RENAME_NOREPLACE: never over anything, an empty directory included, and
    /// with no check-then-rename fallback. Returns 0 or an errno value (EEXIST; EINVAL or ENOSYS
    /// where the file system or the kernel cannot).
    public static func renameExclusive(from fromDirectory: Int32, _ from: String, to toDirectory: Int32, _ to: String) -> Int32 {
        snap_renameat_exclusive(fromDirectory, from, toDirectory, to)
    }

    /// Swaps `a` and `b` in one step (renameat2 RENAME_EXCHANGE): at no moment is either
    /// name missing. Returns 0 or an errno value.
    public static func renameExchange(_ a: String, _ b: String) -> Int32 {
        snap_rename_exchange(a, b) == 0 ? 0 : errno
    }

    /// `renameNoReplace` from a byte-exact path.
    public static func renameNoReplace(_ from: [UInt8], _ to: String) -> Int32 {
        withCPath(from) { snap_rename_noreplace($0, to) == 0 ? 0 : errno }
    }

    /// Makes the OOM killer pick this process before any other (an isolated job:
    /// memory an image takes must kill the job, not the daemon that supervises it).
    public static func beFirstForOOMKiller() { snap_oom_first() }

    /// `rename(2)` between byte-exact paths. Returns 0 or an errno value.
    public static func rename(_ from: [UInt8], _ to: [UInt8]) -> Int32 {
        withCPath(from) { a in withCPath(to) { b in Glibc.rename(a, b) == 0 ? 0 : errno } }
    }

    /// `open(2)` of a byte-exact path: the descriptor, or -1 with `errno` set.
    public static func open(_ path: [UInt8], _ flags: Int32) -> Int32 {
        withCPath(path) { Glibc.open($0, flags) }
    }

    /// Whether something exists at a byte-exact path (`lstat(2)`, symlinks not followed).
    public static func exists(_ path: [UInt8]) -> Bool {
        var st = stat()
        return withCPath(path) { lstat($0, &st) } == 0
    }

    /// What `lstat(2)` says of a byte-exact path, or nil if it fails.
    public struct Status: Sendable {
        public typealias Kind = DirectoryHandle.Entry.Kind
        public let kind: Kind
        public let size: Int
    }

    public static func status(_ path: [UInt8]) -> Status? {
        var st = stat()
        guard withCPath(path, { lstat($0, &st) }) == 0 else { return nil }
        let kind = Status.Kind(mode: st.st_mode)
        return Status(kind: kind, size: Int(st.st_size))
    }

    /// Whether a byte-exact path is itself a symbolic link.
    public static func isSymbolicLink(_ path: [UInt8]) -> Bool {
        var st = stat()
        return withCPath(path) { lstat($0, &st) } == 0 && (st.st_mode & S_IFMT) == S_IFLNK
    }

    private static func withCPath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        (path + [0]).withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// One inotify event.
    public struct InotifyEvent: Sendable, Equatable {
        public let mask: UInt32
        /// The name in its escaped form (`FileName.escaped`).
        public let name: String
        /// False when the name is not valid UTF-8 (`name` is then escaped, and no such file exists).
        public let isUTF8: Bool
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
            let name = FileName(bytes: Array(nameBytes.prefix { $0 != 0 }))
            events.append(InotifyEvent(mask: mask, name: name.escaped, isUTF8: name.string != nil))
            offset += 16 + length
        }
        return events
    }
}

/// A name in a directory, byte for byte. Linux names are bytes, not text: a
/// Latin-1 name copied from an SMB share is not valid UTF-8 and has no exact
/// `String` form.
public struct FileName: Sendable, Hashable {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// The name as text, or nil when it is not valid UTF-8.
    public var string: String? { String(validating: bytes, as: UTF8.self) }

    /// Printable and always valid UTF-8: the name itself when it is valid UTF-8;
    /// otherwise every byte that is not part of a valid UTF-8 sequence is written
    /// as `%XX` (upper-case hex), and the rest is kept (`caf\xE9.jpg` → `caf%E9.jpg`).
    public var escaped: String {
        if let string { return string }
        var out = ""
        var i = 0
        while i < bytes.count {
            if let n = Self.sequenceLength(bytes, at: i) {
                out += String(decoding: bytes[i..<(i + n)], as: UTF8.self)
                i += n
            } else {
                out += String(format: "%%%02X", bytes[i])
                i += 1
            }
        }
        return out
    }

    /// The length of the valid UTF-8 sequence starting at `i`, or nil (RFC 3629:
    /// no overlong forms, no surrogates, nothing above U+10FFFF).
    static func sequenceLength(_ b: [UInt8], at i: Int) -> Int? {
        let lead = b[i]
        if lead < 0x80 { return 1 }
        var low: UInt8 = 0x80, high: UInt8 = 0xBF
        let n: Int
        switch lead {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: n = 3
        case 0xED: n = 3; high = 0x9F
        case 0xF0: n = 4; low = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; high = 0x8F
        default: return nil
        }
        guard i + n <= b.count, (low...high).contains(b[i + 1]) else { return nil }
        for k in 2..<n where !(0x80...0xBF).contains(b[i + k]) { return nil }
        return n
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

extension POSIX {
    /// The width in columns of the terminal on `fd`, or nil if it is not a terminal (or says 0).
    public static func terminalColumns(_ fd: Int32) -> Int? {
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}

/// File-system calls Swift's Glibc module does not export.
public enum FileSystem {
    /// Flushes every dirty page and inode of the filesystem holding `path`.
    /// Returns 0, or an errno value.
    public static func syncfs(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return snap_syncfs(fd) == 0 ? 0 : errno
    }

    /// Marks the directory open as `fd` as the top of unrelated hierarchies (ext2/3/4's
    /// `FS_TOPDIR_FL`, `chattr +T`): new subdirectories are spread over the filesystem's
    /// block groups rather than packed beside it. Returns whether the flag is set; false
    /// where the filesystem has no such flag (tmpfs, XFS) or the caller may not set it.
    @discardableResult
    public static func markTopDirectory(fd: Int32) -> Bool {
        var top: Int32 = 0
        return snap_mark_top_directory(fd, &top) == 0 && top != 0
    }

    /// Whether the directory at `path` has that flag; nil where the filesystem has no flags.
    public static func isTopDirectory(_ path: String) -> Bool? {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let answer = snap_is_top_directory(fd)
        return answer < 0 ? nil : answer == 1
    }
}
