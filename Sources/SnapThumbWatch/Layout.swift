import SystemKit
import SnapThumbCore
import SnapThumbStore
/// The upload directory's contract:
///
///     <upload-dir>/incoming/              new uploads (renamed in, or written in place)
///     <upload-dir>/processing/<worker>/   claims: uploads one worker is processing (+ its .lease)
///     <upload-dir>/done/                  processed sources (after their manifest was published)
///     <upload-dir>/failed/                permanent failures, each with <name>.error.json
///
/// Every upload is in exactly one of these at any moment; it moves between them
/// only by rename(2), which is atomic within one file system.
public struct Layout: Sendable {
    /// The upload directory, without a trailing slash.
    public let root: String
    public var incoming: String { root + "/incoming" }
    public var processing: String { root + "/processing" }
    public var done: String { root + "/done" }
    public var failed: String { root + "/failed" }

    public init(root: String) {
        self.root = root.utf8.count > 1 && PathBytes.endsWithSlash(root) ? String(decoding: root.utf8.dropLast(), as: UTF8.self) : root
    }

    /// Where `worker` keeps its claims (and its `.lease`).
    public func claims(of worker: String) -> String { "\(processing)/\(worker)" }

    /// The four folders' names in the upload directory.
    static let folders = ["incoming", "processing", "done", "failed"]

    /// A sentence when one of the four folders exists and is not a real directory (a
    /// symbolic link, a file): checked at start, before any work (exit 2).
    public func unsafeFolder() -> String? {
        for name in Self.folders {
            guard let status = POSIX.status(Array("\(root)/\(name)".utf8)) else { continue }
            switch status.kind {
            case .directory: continue
            case .symbolicLink:
                return "\(root)/\(name) is a symbolic link; watch never follows one inside the upload directory (make it a real directory)"
            default:
                return "\(root)/\(name) is not a directory"
            }
        }
        return nil
    }
}

/// The upload directory, opened once by descriptor: the root (which may be a symlink:
/// the operator's choice) and its four folders, each opened from it with `O_NOFOLLOW`.
/// Every move, write and removal in them is made relative to these descriptors
/// (`renameat2`, `openat`, `unlinkat`), so a folder swapped for a symlink (or moved)
/// by a writer of the upload directory cannot redirect anything outside it; `problem()`
/// tells when that happened, and claiming stops until it is put right.
final class UploadDirectory: Sendable {
    let layout: Layout
    let root: DirectoryHandle
    let incoming: DirectoryHandle
    let processing: DirectoryHandle
    let done: DirectoryHandle
    let failed: DirectoryHandle

    /// Opens (creating what is missing) the root and its four folders. A folder that
    /// is a symlink or not a directory is refused with a sentence.
    init(layout: Layout) throws(SnapError) {
        self.layout = layout
        do { try FileOps.makeDirectory(layout.root) } catch let error as SnapError { throw error } catch { throw SnapError(.io, "\(error)") }
        let root: DirectoryHandle
        do { root = try DirectoryHandle.open(layout.root) } catch { throw SnapError.io("cannot open the upload directory", layout.root, errno: error.code) }
        self.root = root
        incoming = try Self.folder(root, "incoming")
        processing = try Self.folder(root, "processing")
        done = try Self.folder(root, "done")
        failed = try Self.folder(root, "failed")
    }

    private static func folder(_ root: DirectoryHandle, _ name: String) throws(SnapError) -> DirectoryHandle {
        do { return try root.subdirectory(name, create: true) } catch {
            throw folderError(root, name, error.code)
        }
    }

    /// What it means that `name` in `parent` could not be opened as a directory.
    static func folderError(_ parent: DirectoryHandle, _ name: String, _ code: Int32) -> SnapError {
        switch parent.kind(of: name) {
        case .symbolicLink?:
            return SnapError(.io, "\(parent.path)/\(name) is a symbolic link; watch never follows one inside the upload directory")
        case let kind? where kind != .directory:
            return SnapError(.io, "\(parent.path)/\(name) is not a directory")
        default:
            return SnapError.io("cannot open directory", "\(parent.path)/\(name)", errno: code)
        }
    }

    /// Nil while every folder's name still leads to the directory opened at start; else
    /// a sentence saying which one was replaced (by a symlink, another directory) or removed.
    func problem() -> String? {
        for (name, folder) in [("incoming", incoming), ("processing", processing), ("done", done), ("failed", failed)] {
            if root.holds(name, folder) { continue }
            switch root.kind(of: name) {
            case nil: return "\(layout.root)/\(name) was removed or renamed"
            case .symbolicLink?: return "\(layout.root)/\(name) was replaced by a symbolic link"
            default: return "\(layout.root)/\(name) was replaced by another file or directory"
            }
        }
        return nil
    }
}

/// Which names in `incoming/` are uploads, and what a retried upload's name means.
public enum UploadName {
    /// Suffixes of names that are still being written by common tools.
    static let partialSuffixes = [".part", ".partial", ".tmp", ".crdownload", ".filepart", ".swp", "~"]

    /// Older versions returned a crashed claim to `incoming/` as `<name>~attempt-<n>`;
    /// such a name still means key `<name>`. (Claims of dead workers are now taken
    /// over under their own name and processed alone: see `Claims.takeOverAbandoned`.)
    static let attemptMarker = "~attempt-"

    /// Dot-files and partial names are not uploads (yet).
    public static func isUpload(_ name: String) -> Bool {
        !PathBytes.isHidden(name) && !partialSuffixes.contains(where: { name.hasSuffix($0) })
    }

    /// The highest attempt count a marker may carry: older versions wrote at most
    /// `--max-attempts` (3 by default), so four digits leave room and keep the rule
    /// simple.
    static let maxMarkedAttempts = 9999

    /// The upload's key (its name without an attempt marker) and the attempts so far.
    /// One rule: a name ending in `~attempt-<n>`, where `<n>` is a decimal from 1 to
    /// 9999 written without a sign or leading zeros and something comes before the
    /// marker, is key `<name>` after `<n>` attempts; any other name (`a~attempt-0`,
    /// `a~attempt-007`, `a~attempt-99999999999999999999`) is its own key. Read by
    /// bytes, never by Character.
    public static func parse(_ name: String) -> (key: String, attempts: Int) {
        let bytes = Array(name.utf8)
        let marker = Array(attemptMarker.utf8)
        guard let digitsStart = bytes.lastIndex(of: UInt8(ascii: "-")).map({ $0 + 1 }),
              digitsStart >= marker.count + 1,
              Array(bytes[(digitsStart - marker.count)..<digitsStart]) == marker else { return (name, 0) }
        let digits = bytes[digitsStart...]
        guard (1...4).contains(digits.count), digits.first != UInt8(ascii: "0"),
              digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else { return (name, 0) }
        let n = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        guard n <= maxMarkedAttempts else { return (name, 0) }
        return (String(decoding: bytes[..<(digitsStart - marker.count)], as: UTF8.self), n)
    }

    /// The name under which an upload with `attempts` crashed attempts goes back to `incoming/`.
    public static func with(key: String, attempts: Int) -> String {
        attempts > 0 ? "\(key)\(attemptMarker)\(attempts)" : key
    }
}
