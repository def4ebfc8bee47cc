#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import VipsKit

/// The few file-system operations the watcher needs, as thin wrappers that turn
/// `errno` into a `SnapError` a person can act on.
enum FileOps {
    /// Writes `bytes` to `path` atomically and durably (see `AtomicFile`).
    static func writeAtomically(_ bytes: [UInt8], to path: String) throws {
        try AtomicFile.write(bytes, to: path)
    }

    /// Best effort: a rename is already atomic; the fsync makes it survive power loss.
    static func fsyncDirectory(_ path: String) { AtomicFile.syncDirectory(path) }

    static func makeDirectory(_ path: String) throws {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else {
                throw SnapError(.config, "\(path) exists and is not a directory")
            }
            return
        }
        let parent = Paths.parent(of: path)
        if !parent.isEmpty, parent != path { try makeDirectory(parent) }
        if mkdir(path, 0o755) != 0, errno != EEXIST { throw error("cannot create directory", path) }
    }

    /// Names in a directory, read in a streaming fashion (`.` and `..` left out).
    /// `body` returns false to stop early.
    static func forEachName(in directory: String, _ body: (String) -> Bool) throws {
        let code = POSIX.forEachName(in: directory, body)
        if code != 0 { errno = code; throw error("cannot read directory", directory) }
    }

    /// Moves `path` into `directory` under `name`, or, when that name is taken
    /// (or `taken` says so), under `<stem>~2<.ext>`, `~3`… : never over another
    /// file. link(2) then unlink(2), since rename(2) replaces. Returns the name used.
    static func moveWithoutReplacing(_ path: String, into directory: String, name: String,
                                     taken: (String) -> Bool = { _ in false }) throws -> String {
        let ext = (name as NSString).pathExtension
        let stem = ext.isEmpty ? name : String(name.dropLast(ext.count + 1))
        for n in 1...10_000 {
            let candidate = n == 1 ? name : "\(stem)~\(n)\(ext.isEmpty ? "" : "." + ext)"
            if taken(candidate) { continue }
            let target = "\(directory)/\(candidate)"
            // One rename that never replaces (also for a directory or symlink, which link(2) cannot take).
            let code = POSIX.renameNoReplace(path, target)
            if code == 0 { return candidate }
            if code != EEXIST { errno = code; throw error("cannot move \(path) to", target) }
        }
        throw SnapError(.io, "cannot move \(path) into \(directory): 10000 files named like \(name) are there")
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

}

/// Wall-clock seconds since 1970 (compared with file mtimes).
func wallNow() -> Double { Date().timeIntervalSince1970 }
