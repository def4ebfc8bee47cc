#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SystemKit

/// Lists the regular files under a directory without following symbolic links.
public enum FileWalker {
    /// One file found by the walk.
    public struct Entry: Sendable, Equatable {
        /// Path relative to the root, `/`-separated: the upload's key. A name that is
        /// not valid UTF-8 appears escaped (`FileName.escaped`: `caf\xE9.jpg` → `caf%E9.jpg`).
        public let relativePath: String
        /// The path, printable (escaped the same way), for reports and logs.
        public let path: String
        public let size: Int
        /// The store's listing showed no manifest for this key (no need to ask).
        public var manifestAbsent = false
        /// The path byte for byte, when it differs from `path` (a name that is not
        /// UTF-8); reading uses it so that such files are processed, not skipped.
        public let rawPath: [UInt8]?
        /// What a bucket notification announced (`consume`): the version to read and what
        /// its bytes must be. Nil for files walked and objects listed.
        public var expected: SourceExpectation? = nil

        public init(relativePath: String, path: String, size: Int, manifestAbsent: Bool = false, rawPath: [UInt8]? = nil) {
            self.relativePath = relativePath
            self.path = path
            self.size = size
            self.manifestAbsent = manifestAbsent
            self.rawPath = rawPath
        }

        /// Reads the file (see `InputFile.read`).
        public func read(limit: Int) throws -> SourceBuffer {
            if let rawPath { return try InputFile.read(bytes: rawPath, display: path, limit: limit) }
            return try InputFile.read(path, limit: limit)
        }
    }

    /// Regular files under `root`, sorted by relative path. Symlinks, devices,
    /// sockets and dot-files/dot-directories are skipped (counted in `skipped`);
    /// so is the subtree at `exclude` (e.g. a store that lives inside the root).
    public static func regularFiles(under root: String, excluding exclude: String? = nil) throws -> (files: [Entry], skipped: Int) {
        var st = stat()
        guard lstat(root, &st) == 0 else { throw SnapError.io("cannot read", root, errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw SnapError(.io, "\(root) is not a directory") }
        // Names that are not UTF-8 are listed by their bytes and keyed by their escaped form.
        let excluded = exclude.map(canonical)
        var files: [Entry] = []
        var skipped = 0
        // Relative paths as (escaped text, raw bytes); the raw form is kept only when it differs.
        var pending: [(text: String, raw: [UInt8]?)] = [("", nil)]
        let rootBytes = Array(root.utf8)
        while let (relative, relativeRaw) = pending.popLast() {
            let directory = relative.isEmpty ? root : "\(root)/\(relative)"
            if let excluded, relativeRaw == nil, canonical(directory) == excluded { continue }
            var names: [FileName] = []
            let code: Int32
            if let relativeRaw {
                code = POSIX.forEachEntry(inBytes: rootBytes + [0x2F] + relativeRaw) { names.append($0); return true }
            } else {
                code = POSIX.forEachEntry(in: directory) { names.append($0); return true }
            }
            if code != 0 { throw SnapError.io("cannot list", directory, errno: code) }
            for name in names {
                if name.bytes.first == 0x2E { skipped += 1; continue }
                let text = name.escaped
                let childRelative = relative.isEmpty ? text : "\(relative)/\(text)"
                var childRaw: [UInt8]?
                if let relativeRaw {
                    childRaw = relativeRaw + [0x2F] + name.bytes
                } else if name.string == nil {
                    childRaw = (relative.isEmpty ? [] : Array(relative.utf8) + [0x2F]) + name.bytes
                }
                let childPath = "\(root)/\(childRelative)"
                guard let info = POSIX.status(childRaw.map { rootBytes + [0x2F] + $0 } ?? Array(childPath.utf8)) else { skipped += 1; continue }
                switch info.kind {
                case .directory: pending.append((childRelative, childRaw))
                case .regular:
                    files.append(Entry(relativePath: childRelative, path: childPath, size: info.size,
                                       rawPath: childRaw.map { rootBytes + [0x2F] + $0 }))
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
