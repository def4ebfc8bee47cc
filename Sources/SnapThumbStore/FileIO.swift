#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization
import SnapThumbCore
import SystemKit

/// Reading inputs.
public enum InputFile {
    /// Reads a regular file whole, refusing it before reading when it is over `limit` bytes.
    public static func read(_ path: String, limit: Int) throws -> SourceBuffer {
        try read(bytes: Array(path.utf8), display: path, limit: limit)
    }

    /// Reads the file at a byte-exact path (a name that is not UTF-8); `display` names it in errors.
    /// Anything but a regular file (a FIFO, a device, a directory, a symlink) is refused
    /// without blocking: the open does not wait for a FIFO's writer.
    public static func read(bytes path: [UInt8], display: String, limit: Int) throws -> SourceBuffer {
        let fd = POSIX.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP, POSIX.isSymbolicLink(path) {
                throw SnapError(.unsupported, "\(display) is a symbolic link, not a regular file")
            }
            throw SnapError.source("cannot open", display, errno: code)
        }
        defer { close(fd) }
        return try read(fd: fd, display: display, limit: limit)
    }

    /// Reads the file open at `fd` (opened with `O_NONBLOCK`), refused unless it is a
    /// regular file of at most `limit` bytes. The caller closes `fd`.
    public static func read(fd: Int32, display: String, limit: Int) throws -> SourceBuffer {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SnapError.source("cannot stat", display, errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw SnapError(.unsupported, "\(display) is not a regular file (\(fileKind(st.st_mode))): only regular files are images")
        }
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
        let size = Int(st.st_size)
        guard size <= limit else {
            throw SnapError(.tooLarge, "input is \(size) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
        }
        switch POSIX.readSource(fd, count: size) {
        case .success(let buffer): return buffer
        case .failure(let code): throw SnapError.source("cannot read", display, errno: code.code)
        }
    }

    private static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        case S_IFDIR: return "a directory"
        case S_IFLNK: return "a symbolic link"
        default: return "not a regular file"
        }
    }
}

/// Small files replaced atomically (error records, leases, metrics).
public enum AtomicFile {
    /// Writes `bytes` to `path` atomically and durably: a temp file in the same
    /// directory, fsync, rename over `path`, then (best effort: the rename is
    /// already atomic) an fsync of the directory.
    public static func write(_ bytes: [UInt8], to path: String) throws {
        let directory = Paths.parent(of: path)
        let temp = Durable.tempPath(in: directory, for: PathBytes.lastComponent(path))
        try Durable.writeNew(temp, bytes)
        guard rename(temp, path) == 0 else {
            let code = errno
            unlink(temp)
            throw SnapError.io("cannot rename into place", path, errno: code)
        }
        try? Durable.fsyncDirectory(directory)
    }

    /// fsync of a directory, best effort.
    public static func syncDirectory(_ path: String) { try? Durable.fsyncDirectory(path) }
}

/// Path arithmetic on plain strings. Foundation's `NSString.deletingLastPathComponent`
/// traps on Linux for a one-character name without a slash (`--store s`), so the
/// store, the watcher and the commands use this instead.
public enum Paths {
    /// The directory part of `path`, as `dirname` without its "." for a bare name:
    /// "a/b" → "a", "/a" → "/", "a" → "", "a/b/" → "a".
    public static func parent(of path: String) -> String {
        // Bytes, not Characters: "a/\u{301}b" has a slash that a Character search misses.
        var bytes = Array(path.utf8)[...]
        let slash = UInt8(ascii: "/")
        while bytes.count > 1, bytes.last == slash { bytes = bytes.dropLast() }
        guard let index = bytes.lastIndex(of: slash) else { return "" }
        if index == bytes.startIndex { return "/" }
        var parent = bytes[..<index]
        while parent.count > 1, parent.last == slash { parent = parent.dropLast() }
        return String(decoding: parent, as: UTF8.self)
    }
}

/// Durable file operations: every write is fsynced, and so is the directory
/// entry that makes it visible.
public enum Durable {
    private static let counter = Counter()

    /// A temp name in `directory` that no other process or thread picks.
    static func tempPath(in directory: String, for name: String) -> String {
        "\(directory)/\(tempName(for: name))"
    }

    /// A temp file name that no other process or thread picks: `.tmp-<pid>-<n>-`
    /// and at most 40 bytes of `name` (bytes: one Character can be any length).
    public static func tempName(for name: String) -> String {
        ".tmp-\(pid)-\(counter.next())-\(prefix(name))"
    }

    /// `PathBytes.prefix(name, maxBytes: 40)` without its scalar-by-scalar copy where
    /// that cannot differ: a name that fits, or an ASCII one (a blob's hex), cut by bytes.
    private static func prefix(_ name: String) -> String {
        let bytes = name.utf8
        if bytes.count <= 40 { return name }
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes.prefix(40), as: UTF8.self) }
        return PathBytes.prefix(name, maxBytes: 40)
    }

    /// This process's id, asked once (glibc's `getpid` is a system call each time; four temp names per upload).
    private static let pid = getpid()

    /// Writes `bytes` to a new file at `path` (which must not exist) and fsyncs it
    /// unless `sync` is false (a group commit syncs the filesystem once instead).
    static func writeNew(_ path: String, _ bytes: [UInt8], sync: Bool = true) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SnapError.io("cannot create", path, errno: errno) }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(path) }
        }
        let code = POSIX.writeAll(fd, bytes)
        if code != 0 { throw SnapError.io("cannot write", path, errno: code) }
        if sync, fsync(fd) != 0 { throw SnapError.io("cannot fsync", path, errno: errno) }
        ok = true
    }

    static func fsyncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SnapError.io("cannot open directory", path, errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SnapError.io("cannot fsync directory", path, errno: errno) }
    }

    /// `mkdir -p`, fsyncing the parent of every directory it creates unless
    /// `sync` is false: for files that a later filesystem sync makes durable
    /// anyway (a group commit), which covers the new directory entries too.
    static func makeDirectories(_ path: String, sync: Bool = true) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw SnapError(.io, "\(path) exists and is not a directory") }
            return
        }
        let parent = Paths.parent(of: path)
        if !parent.isEmpty, parent != path { try makeDirectories(parent, sync: sync) }
        if mkdir(path, 0o755) != 0 {
            if errno == EEXIST { return }
            throw SnapError.io("cannot create directory", path, errno: errno)
        }
        if sync { try fsyncDirectory(parent.isEmpty ? "." : parent) }
    }

    /// Reads a whole file, or nil if it does not exist.
    public static func readIfExists(_ path: String) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw SnapError.io("cannot open", path, errno: errno)
        }
        defer { close(fd) }
        var out = [UInt8]()
        while true {
            switch POSIX.read(fd, capacity: 65536) {
            case .success(let chunk) where chunk.isEmpty: return out
            case .success(let chunk): out += chunk
            case .failure(let code): throw SnapError.io("cannot read", path, errno: code.code)
            }
        }
    }

    private final class Counter: Sendable {
        private let value = Mutex(0)
        func next() -> Int { value.withLock { $0 += 1; return $0 } }
    }
}

/// Directory and status operations for the watch folder and the clean-up, turning
/// `errno` into a `SnapError` a person can act on. (One layer: the raw calls are
/// VipsKit's POSIX; durable writes are `Durable` and `AtomicFile` above.)
public enum FileOps {
    /// Writes `bytes` to `path` atomically and durably (see `AtomicFile`).
    public static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try AtomicFile.write(bytes, to: path)
    }

    /// Best effort: a rename is already atomic; the fsync makes it survive power loss.
    public static func fsyncDirectory(_ path: String) { AtomicFile.syncDirectory(path) }

    /// `mkdir -p`, each new directory made durable.
    public static func makeDirectory(_ path: String) throws {
        try Durable.makeDirectories(path)
    }

    /// Names in a directory, read in a streaming fashion (`.` and `..` left out).
    /// `body` returns false to stop early.
    public static func forEachName(in directory: String, _ body: (String) -> Bool) throws {
        let code = POSIX.forEachName(in: directory, body)
        if code != 0 { errno = code; throw error("cannot read directory", directory) }
    }

    /// Moves `name` from `source` into `target` (two directories held open) under
    /// `newName`, or, when that name is taken (or `taken` says so), under
    /// `<stem>~2<.ext>`, `~3`… : never over another file (renameat2 with
    /// RENAME_NOREPLACE), never through a symlink swapped in for either directory.
    /// Returns the name used.
    public static func moveWithoutReplacing(_ name: String, from source: DirectoryHandle, into target: DirectoryHandle, name newName: String,
                                            taken: (String) -> Bool = { _ in false }) throws -> String {
        let ext = PathBytes.pathExtension(newName)
        let stem = ext.isEmpty ? newName : String(decoding: newName.utf8.dropLast(ext.utf8.count + 1), as: UTF8.self)
        for n in 1...10_000 {
            let candidate = n == 1 ? newName : "\(stem)~\(n)\(ext.isEmpty ? "" : "." + ext)"
            if taken(candidate) { continue }
            let code = source.moveNoReplace(name, to: target, as: candidate)
            if code == 0 { return candidate }
            if code != EEXIST { throw SnapError.io("cannot move \(source.path)/\(name) to", "\(target.path)/\(candidate)", errno: code) }
        }
        throw SnapError(.io, "cannot move \(source.path)/\(name) into \(target.path): 10000 files named like \(newName) are there")
    }

    public struct Status: Equatable, Sendable {
        public var size: Int
        public var mtime: Double
        /// Change time: a rename sets it, so it dates an upload's arrival in `done/`.
        public var ctime: Double
        public var isRegular: Bool
        public var isDirectory: Bool

        public init(size: Int, mtime: Double, ctime: Double, isRegular: Bool, isDirectory: Bool) {
            (self.size, self.mtime, self.ctime, self.isRegular, self.isDirectory) = (size, mtime, ctime, isRegular, isDirectory)
        }

        /// What `fstatat` said of an entry in a directory held open.
        public init(_ entry: DirectoryHandle.Entry) {
            self.init(size: entry.size, mtime: entry.mtime, ctime: entry.ctime, isRegular: entry.kind == .regular, isDirectory: entry.kind == .directory)
        }
    }

    public static func status(_ path: String) -> Status? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        let mode = st.st_mode & S_IFMT
        return Status(size: Int(st.st_size),
                      mtime: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9,
                      ctime: Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9,
                      isRegular: mode == S_IFREG, isDirectory: mode == S_IFDIR)
    }

    public static func error(_ doing: String, _ path: String) -> SnapError {
        let code = errno
        return SnapError(.io, "\(doing) \(path): \(String(cString: strerror(code)))", cause: "errno \(code)")
    }

}

/// Wall-clock seconds since 1970 (compared with file mtimes).
public func wallNow() -> Double { Date().timeIntervalSince1970 }

extension Pipeline {
    /// Reads `path` (refusing files over the input limit before reading them) and processes it.
    public func process(file path: String, key: String) throws -> ProcessedUpload {
        try process(InputFile.read(path, limit: settings.limits.maxInputBytes), key: key)
    }
}
