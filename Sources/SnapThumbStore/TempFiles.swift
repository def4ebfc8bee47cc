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
    static func isStale(_ entry: DirectoryHandle.Entry?, pid: Int32) -> Bool {
        if pid != getpid(), !isAlive(pid: pid) { return true }
        guard let entry else { return false }
        return Date().timeIntervalSince1970 - entry.mtime > 86_400
    }

    /// Walks the directories under `root` (the root may be a symlink: the operator's
    /// choice), each opened by descriptor from its parent without following a symlink
    /// and without entering dot-directories, and calls `body` with each directory and
    /// each of our temp names in it. A directory swapped for a symlink during the walk is
    /// not entered: nothing outside `root` is ever looked at.
    static func walk(under root: String, _ body: (DirectoryHandle, String, Int32) -> Void) {
        guard let top = try? DirectoryHandle.open(root) else { return }
        walk(top, body)
    }

    /// `walk(under:)` from a directory already open.
    static func walk(_ top: DirectoryHandle, _ body: (DirectoryHandle, String, Int32) -> Void) {
        var directories = [top]
        while let directory = directories.popLast() {
            var subdirectories: [String] = []
            _ = directory.forEachName { name in
                if let temp = parse(name) {
                    body(directory, name, temp.pid)
                } else if !PathBytes.isHidden(name), directory.kind(of: name) == .directory {
                    subdirectories.append(name)
                }
                return true
            }
            for name in subdirectories {
                if let sub = try? directory.subdirectory(name) { directories.append(sub) }
            }
        }
    }

    /// Our temp files under `root` (a store, or one of the upload directory's
    /// sub-folders), recursively, without entering dot-directories or following symlinks.
    public static func find(under root: String) -> [(path: String, pid: Int32)] {
        var found: [(String, Int32)] = []
        walk(under: root) { directory, name, pid in found.append((directory.display(name), pid)) }
        return found
    }

    /// Removes the stale temp files under `root`, each by `unlinkat` on the directory
    /// the walk opened (never by a path resolved again); returns how many.
    @discardableResult
    public static func removeStale(under root: String) -> Int {
        guard let top = try? DirectoryHandle.open(root) else { return 0 }
        return removeStale(in: top)
    }

    /// `removeStale(under:)` below a directory already open (an upload directory's folder).
    @discardableResult
    public static func removeStale(in top: DirectoryHandle) -> Int {
        var removed = 0
        walk(top) { directory, name, pid in
            guard isStale(directory.status(name), pid: pid) else { return }
            // A directory: the empty one a store leaves when killed while making a fan-out
            // directory (`OpenDirectories.makeBeside`); rmdir removes nothing that is not empty.
            let code = directory.unlink(name)
            if code == 0 || (code == EISDIR && directory.removeDirectory(name) == 0) { removed += 1 }
        }
        return removed
    }

    /// Removes the stale temp files of one file that is replaced atomically (the
    /// metrics file), looking only in its own directory and only at its own temp
    /// names: that directory is usually shared with other programs.
    @discardableResult
    public static func removeStale(of file: String) -> Int {
        let directoryPath = Paths.parent(of: file)
        let ownName = PathBytes.prefix(PathBytes.lastComponent(file), maxBytes: 40)
        guard let directory = try? DirectoryHandle.open(directoryPath.isEmpty ? "." : directoryPath) else { return 0 }
        var stale: [String] = []
        _ = directory.forEachName { name in
            if let temp = parse(name), temp.name == ownName, isStale(directory.status(name), pid: temp.pid) { stale.append(name) }
            return true
        }
        return stale.filter { directory.unlink($0) == 0 }.count
    }
}

extension DirectoryHandle {
    /// `name` in this directory, for messages.
    func display(_ name: String) -> String { path.isEmpty ? name : "\(path)/\(name)" }
}

/// The phrase in an `io` failure that says an upload's place in the store is blocked by
/// something that is not SnapThumb's to remove (a directory where its manifest goes, a
/// file where a folder goes): a retry alone does not fix it, so `watch` quarantines the
/// upload with that reason after a bounded number of attempts.
public enum StoreBlocked {
    public static let phrase = "is in the way"
}
