#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SystemKit

/// SnapThumb's own temporary names, `.tmp-<pid>-<n>-<name>` (see `Durable.tempPath`),
/// and the clean-up of the ones a dead process left. Only names of exactly this
/// form are ever touched: another program's `.tmp-…` file is not ours.
public enum TempFiles {
    /// The writer's pid and the final name's prefix, if `fileName` is one of our temp names.
    public static func parse(_ fileName: String) -> (pid: Int32, name: Substring)? {
        // By bytes: a '-' followed by a combining mark is one Character.
        let bytes = Array(fileName.utf8)
        let prefix = Array(".tmp-".utf8)
        guard bytes.starts(with: prefix) else { return nil }
        let parts = bytes[prefix.count...].split(separator: UInt8(ascii: "-"), maxSplits: 2, omittingEmptySubsequences: false)
        let isDigit: (UInt8) -> Bool = { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(isDigit),
              let pid = Int32(String(decoding: parts[0], as: UTF8.self)), pid > 0,
              !parts[1].isEmpty, parts[1].allSatisfy(isDigit), !parts[2].isEmpty else { return nil }
        return (pid, Substring(String(decoding: parts[2], as: UTF8.self)))
    }

    /// Whether a process with this pid exists on this host (EPERM: it exists, owned by
    /// someone else) and has not exited: a zombie (a worker process orphaned when its
    /// daemon was killed, under an init that does not reap) writes nothing any more.
    public static func isAlive(pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        return !isZombie(pid: pid)
    }

    /// Whether /proc says the process has exited and waits to be reaped (state Z or X).
    static func isZombie(pid: Int32) -> Bool {
        guard let stat = FileManager.default.contents(atPath: "/proc/\(pid)/stat") else { return false }
        // "pid (comm) S …": the state follows the last ')', since comm may hold anything.
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.endIndex else { return false }
        let state = stat[close + 2]
        return state == UInt8(ascii: "Z") || state == UInt8(ascii: "X")
    }

    /// A temp file is stale when its writer is gone (and is not us), or when it is
    /// over a day old: one is only ever open for milliseconds.
    static func isStale(_ path: String, pid: Int32) -> Bool {
        if pid != getpid(), !isAlive(pid: pid) { return true }
        var st = stat()
        guard lstat(path, &st) == 0 else { return false }
        return Date().timeIntervalSince1970 - Double(st.st_mtim.tv_sec) > 86_400
    }

    /// Our temp files under `root` (a store, or one of the upload directory's
    /// sub-folders), recursively, without entering dot-directories or following symlinks.
    public static func find(under root: String) -> [(path: String, pid: Int32)] {
        var found: [(String, Int32)] = []
        var directories = [root]
        while let directory = directories.popLast() {
            _ = POSIX.forEachName(in: directory) { name in
                let path = "\(directory)/\(name)"
                if let temp = parse(name) {
                    found.append((path, temp.pid))
                } else if !PathBytes.isHidden(name) {
                    var st = stat()
                    if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR { directories.append(path) }
                }
                return true
            }
        }
        return found
    }

    /// Removes the stale temp files under `root`; returns how many.
    @discardableResult
    public static func removeStale(under root: String) -> Int {
        find(under: root).filter { isStale($0.path, pid: $0.pid) && unlink($0.path) == 0 }.count
    }

    /// Removes the stale temp files of one file that is replaced atomically (the
    /// metrics file), looking only in its own directory and only at its own temp
    /// names: that directory is usually shared with other programs.
    @discardableResult
    public static func removeStale(of file: String) -> Int {
        let directory = Paths.parent(of: file)
        let ownName = PathBytes.prefix(PathBytes.lastComponent(file), maxBytes: 40)
        var stale: [String] = []
        _ = POSIX.forEachName(in: directory.isEmpty ? "." : directory) { name in
            if let temp = parse(name), temp.name == ownName {
                let path = directory.isEmpty ? name : "\(directory)/\(name)"
                if isStale(path, pid: temp.pid) { stale.append(path) }
            }
            return true
        }
        return stale.filter { unlink($0) == 0 }.count
    }
}
