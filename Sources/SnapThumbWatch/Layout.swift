import SnapThumbCore
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
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
    }

    /// Where `worker` keeps its claims (and its `.lease`).
    public func claims(of worker: String) -> String { "\(processing)/\(worker)" }

    /// Creates the four directories.
    func create() throws {
        for directory in [incoming, processing, done, failed] { try FileOps.makeDirectory(directory) }
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
        !name.hasPrefix(".") && !partialSuffixes.contains(where: { name.hasSuffix($0) })
    }

    /// The upload's key (its name without an attempt marker) and the attempts so far.
    public static func parse(_ name: String) -> (key: String, attempts: Int) {
        guard let range = name.range(of: attemptMarker, options: .backwards),
              let n = Int(name[range.upperBound...]), n > 0 else { return (name, 0) }
        return (String(name[..<range.lowerBound]), n)
    }

    /// The name under which an upload with `attempts` crashed attempts goes back to `incoming/`.
    public static func with(key: String, attempts: Int) -> String {
        attempts > 0 ? "\(key)\(attemptMarker)\(attempts)" : key
    }
}
