#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import VipsKit

/// The few file-system operations the watcher needs, as thin wrappers that turn
/// `errno` into a `SnapError` a person can act on.
enum FileOps {
    /// Temp names use the store's pattern (`.tmp-<pid>-<n>-<name>`), so that one
    /// clean-up (`Janitor`) recognises every temp file a dead process left behind.
    static func tempPath(in directory: String, for name: String) -> String {
        "\(directory)/.tmp-\(getpid())-\(counter.next())-\(name.prefix(40))"
    }

    /// Writes `bytes` to `path` atomically and durably: temp file, fsync, rename, fsync directory.
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let temp = tempPath(in: directory, for: (path as NSString).lastPathComponent)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw error("cannot create", temp) }
        var ok = false
        defer { if !ok { unlink(temp) } }
        do {
            defer { close(fd) }
            let code = POSIX.writeAll(fd, bytes)
            if code != 0 { errno = code; throw error("cannot write", temp) }
            guard fsync(fd) == 0 else { throw error("cannot fsync", temp) }
        }
        guard rename(temp, path) == 0 else { throw error("cannot rename into place", path) }
        ok = true
        fsyncDirectory(directory)
    }

    /// Best effort: a rename is already atomic; the fsync makes it survive power loss.
    static func fsyncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    static func makeDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw SnapError(.config, "\(path) exists and is not a directory")
            }
            return
        }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { try makeDirectory(parent) }
        if mkdir(path, 0o755) != 0, errno != EEXIST { throw error("cannot create directory", path) }
    }

    /// Names in a directory, read in a streaming fashion (`.` and `..` left out).
    /// `body` returns false to stop early.
    static func forEachName(in directory: String, _ body: (String) -> Bool) throws {
        let code = POSIX.forEachName(in: directory, body)
        if code != 0 { errno = code; throw error("cannot read directory", directory) }
    }

    struct Status: Equatable {
        var size: Int
        var mtime: Double
        /// Change time: a rename sets it, so it dates an upload's arrival in `done/`.
        var ctime: Double
        var isRegular: Bool
        var isDirectory: Bool
    }

    static func status(_ path: String) -> Status? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        let mode = st.st_mode & S_IFMT
        return Status(size: Int(st.st_size),
                      mtime: Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9,
                      ctime: Double(st.st_ctim.tv_sec) + Double(st.st_ctim.tv_nsec) / 1e9,
                      isRegular: mode == S_IFREG, isDirectory: mode == S_IFDIR)
    }

    /// Sets a file's mtime to now (the lease heartbeat).
    static func touch(_ path: String) -> Bool { utimensat(AT_FDCWD, path, nil, 0) == 0 }

    static func error(_ doing: String, _ path: String) -> SnapError {
        let code = errno
        return SnapError(.io, "\(doing) \(path): \(String(cString: strerror(code)))", cause: "errno \(code)")
    }

    private static let counter = Counter()

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.lock(); defer { lock.unlock() }; value += 1; return value }
    }
}

/// Wall-clock seconds since 1970 (compared with file mtimes).
func wallNow() -> Double { Date().timeIntervalSince1970 }
