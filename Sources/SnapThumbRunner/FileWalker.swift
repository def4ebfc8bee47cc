#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import VipsKit

/// Lists the regular files under a directory without following symbolic links.
public enum FileWalker {
    /// One file found by the walk.
    public struct Entry: Sendable, Equatable {
        /// Path relative to the root, `/`-separated: the upload's key.
        public let relativePath: String
        public let path: String
        public let size: Int
        /// The store's listing showed no manifest for this key (no need to ask).
        public var manifestAbsent = false

        public init(relativePath: String, path: String, size: Int, manifestAbsent: Bool = false) {
            self.relativePath = relativePath
            self.path = path
            self.size = size
            self.manifestAbsent = manifestAbsent
        }
    }

    /// Regular files under `root`, sorted by relative path. Symlinks, devices,
    /// sockets and dot-files/dot-directories are skipped (counted in `skipped`);
    /// so is the subtree at `exclude` (e.g. a store that lives inside the root).
    public static func regularFiles(under root: String, excluding exclude: String? = nil) throws -> (files: [Entry], skipped: Int) {
        var st = stat()
        guard lstat(root, &st) == 0 else { throw SnapError.io("cannot read", root, errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw SnapError(.io, "\(root) is not a directory") }
        let excluded = exclude.map(canonical)
        var files: [Entry] = []
        var skipped = 0
        var pending = [""]
        while let relative = pending.popLast() {
            let directory = relative.isEmpty ? root : "\(root)/\(relative)"
            if let excluded, canonical(directory) == excluded { continue }
            var names: [String] = []
            let code = POSIX.forEachName(in: directory) { names.append($0); return true }
            if code != 0 { throw SnapError.io("cannot list", directory, errno: code) }
            for name in names {
                if name.hasPrefix(".") { skipped += 1; continue }
                let childRelative = relative.isEmpty ? name : "\(relative)/\(name)"
                let childPath = "\(root)/\(childRelative)"
                var info = stat()
                guard lstat(childPath, &info) == 0 else { skipped += 1; continue }
                switch info.st_mode & S_IFMT {
                case S_IFDIR: pending.append(childRelative)
                case S_IFREG: files.append(Entry(relativePath: childRelative, path: childPath, size: Int(info.st_size)))
                default: skipped += 1
                }
            }
        }
        files.sort { $0.relativePath < $1.relativePath }
        return (files, skipped)
    }

    private static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
    }
}
