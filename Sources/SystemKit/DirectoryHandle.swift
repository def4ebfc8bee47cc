internal import CSystemShim
#if canImport(Glibc)
import Glibc
#endif

/// An open directory, and every operation on the names in it made relative to its
/// descriptor (`openat`, `renameat2`, `unlinkat`, `fstatat`, `utimensat`): once it is
/// open, swapping its path for a symbolic link (or moving it) cannot redirect what is
/// done in it. Sub-directories are opened with `O_NOFOLLOW`, so a symlink planted
/// where one should be is refused, never followed.
///
/// Failures come back as `Errno` (thrown) or an errno value; callers name the path.
/// One owner per descriptor: it is closed when the last reference goes.
public final class DirectoryHandle: Sendable {
    /// The descriptor (`O_RDONLY | O_DIRECTORY | O_CLOEXEC`).
    public let fd: Int32
    /// The path it was opened at, for messages only: never used to reach it again.
    public let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Opens the directory at `path`. `followLast`: whether `path` itself may be a
    /// symbolic link (a root the operator chose); a symlink is refused otherwise (ELOOP).
    public static func open(_ path: String, followLast: Bool = true) throws(Errno) -> DirectoryHandle {
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followLast ? 0 : O_NOFOLLOW)
        let fd = Glibc.open(path.isEmpty ? "." : path, flags)
        guard fd >= 0 else { throw Errno(errno) }
        return DirectoryHandle(fd: fd, path: path)
    }

    /// Opens the sub-directory `name` without following a symbolic link (ELOOP, or
    /// ENOTDIR for anything that is not a directory), creating it first (mode 0755)
    /// when `create` and it does not exist (the creation made durable with an fsync of
    /// this directory).
    public func subdirectory(_ name: String, create: Bool = false) throws(Errno) -> DirectoryHandle {
        var fd = openat(self.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        if fd < 0, errno == ENOENT, create {
            if mkdirat(self.fd, name, 0o755) != 0, errno != EEXIST { throw Errno(errno) }
            _ = fsync(self.fd)
            fd = openat(self.fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard fd >= 0 else {
            let code = errno
            // O_NOFOLLOW | O_DIRECTORY on a symlink says ENOTDIR on some kernels: tell it as ELOOP.
            if code == ENOTDIR, kind(of: name) == .symbolicLink { throw Errno(ELOOP) }
            throw Errno(code)
        }
        return DirectoryHandle(fd: fd, path: "\(path)/\(name)")
    }

    /// What a directory entry is and whose, as `fstatat(…, AT_SYMLINK_NOFOLLOW)` says.
    public struct Entry: Sendable, Equatable {
        public enum Kind: Sendable, Equatable {
            case regular, directory, symbolicLink, other

            /// The kind `st_mode` says.
            init(mode: mode_t) {
                switch mode & S_IFMT {
                case S_IFREG: self = .regular
                case S_IFDIR: self = .directory
                case S_IFLNK: self = .symbolicLink
                default: self = .other
                }
            }
        }
        public var kind: Kind
        public var size: Int
        public var owner: UInt32
        public var device: UInt64
        public var inode: UInt64
        public var mtime: Double
        public var ctime: Double
        /// The same file (device and inode).
        public func isSame(as other: Entry) -> Bool { device == other.device && inode == other.inode }
    }

    private static func entry(_ st: stat) -> Entry {
        let kind = Entry.Kind(mode: st.st_mode)
        return Entry(kind: kind, size: Int(st.st_size), owner: st.st_uid, device: UInt64(st.st_dev), inode: UInt64(st.st_ino),
                     mtime: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9,
                     ctime: Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9)
    }

    /// The entry `name` (symlinks not followed), or nil when there is none.
    public func status(_ name: String) -> Entry? {
        var st = stat()
        guard fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return Self.entry(st)
    }

    /// This directory itself (its device and inode, whatever its path now names).
    public func status() -> Entry? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return Self.entry(st)
    }

    /// The kind of entry `name` is, or nil when there is none.
    public func kind(of name: String) -> Entry.Kind? { status(name)?.kind }

    /// Whether `name` in this directory is still this very directory `other` (not
    /// moved away, not replaced by another directory or a symlink).
    public func holds(_ name: String, _ other: DirectoryHandle) -> Bool {
        guard let here = status(name), here.kind == .directory, let there = other.status() else { return false }
        return here.isSame(as: there)
    }

    /// Calls `body` with each name in it (`.` and `..` left out), byte for byte;
    /// `body` returns false to stop. Returns 0 or an errno value. Reads through a
    /// descriptor of its own (`openat(fd, ".")`), so this one's offset is untouched.
    public func forEachEntry(_ body: (FileName) -> Bool) -> Int32 {
        let own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard own >= 0 else { return errno }
        guard let handle = fdopendir(own) else {
            let code = errno
            close(own)
            return code
        }
        defer { closedir(handle) }
        return POSIX.readEntries(handle, body)
    }

    /// `forEachEntry` with each name in its escaped form (`FileName.escaped`).
    public func forEachName(_ body: (String) -> Bool) -> Int32 {
        forEachEntry { body($0.escaped) }
    }

    /// Moves `name` to `target/newName` unless something is there already (EEXIST).
    /// Returns 0 or an errno value.
    public func moveNoReplace(_ name: String, to target: DirectoryHandle, as newName: String) -> Int32 {
        snap_renameat_noreplace(fd, name, target.fd, newName) == 0 ? 0 : errno
    }

    /// `moveNoReplace` of an entry whose name is not UTF-8 (byte for byte).
    public func moveNoReplace(bytes name: [UInt8], to target: DirectoryHandle, as newName: String) -> Int32 {
        (name + [0]).withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { snap_renameat_noreplace(fd, $0.baseAddress!, target.fd, newName) == 0 ? 0 : errno }
        }
    }

    /// Removes the entry `name` (never a directory). Returns 0 or an errno value.
    @discardableResult
    public func unlink(_ name: String) -> Int32 { unlinkat(fd, name, 0) == 0 ? 0 : errno }

    /// Removes the empty sub-directory `name`. Returns 0 or an errno value.
    @discardableResult
    public func removeDirectory(_ name: String) -> Int32 { unlinkat(fd, name, AT_REMOVEDIR) == 0 ? 0 : errno }

    /// Sets the mtime of `name` to now, without following a symlink. Returns 0 or an errno value.
    public func touch(_ name: String) -> Int32 { utimensat(fd, name, nil, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : errno }

    /// Opens the regular file `name` for reading, without following a symlink or
    /// waiting for a FIFO's writer: the descriptor (the caller closes it), or an errno value.
    public func openFile(_ name: String) -> Result<Int32, Errno> {
        let fd = openat(self.fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        return fd >= 0 ? .success(fd) : .failure(Errno(errno))
    }

    /// Reads the regular file `name` whole when it is at most `limit` bytes; nil when it
    /// is missing, not a regular file (a symlink, a FIFO) or larger.
    public func readSmallFile(_ name: String, limit: Int) -> [UInt8]? {
        guard case .success(let file) = openFile(name) else { return nil }
        defer { close(file) }
        var st = stat()
        guard fstat(file, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, Int(st.st_size) <= limit else { return nil }
        guard case .success(let bytes) = POSIX.read(file, capacity: limit + 1), bytes.count <= limit else { return nil }
        return bytes
    }

    /// Creates `name` (which must not exist; never through a symlink) with `bytes`, fsynced.
    public func writeNew(_ name: String, _ bytes: [UInt8]) throws(Errno) {
        let file = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard file >= 0 else { throw Errno(errno) }
        var code = POSIX.writeAll(file, bytes)
        if code == 0, fsync(file) != 0 { code = errno }
        close(file)
        if code != 0 {
            unlinkat(fd, name, 0)
            throw Errno(code)
        }
    }

    /// Replaces `name` with `bytes` atomically and durably: `tempName` is written and
    /// fsynced, renamed over `name`, and this directory fsynced (best effort).
    public func writeAtomically(_ name: String, _ bytes: [UInt8], tempName: String) throws(Errno) {
        try writeNew(tempName, bytes)
        guard renameat(fd, tempName, fd, name) == 0 else {
            let code = errno
            unlinkat(fd, tempName, 0)
            throw Errno(code)
        }
        _ = fsync(fd)
    }

    /// fsync of the directory (its entries made durable). Returns 0 or an errno value.
    @discardableResult
    public func sync() -> Int32 { fsync(fd) == 0 ? 0 : errno }
}
