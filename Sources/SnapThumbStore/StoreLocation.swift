import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore

/// A kind of store named by a URL scheme (`s3://`): the bucket store plugs in
/// here, so that opening a store from a string is the store layer's job and the
/// store layer knows no bucket. A new backend is a module with one of these and
/// one line in the list the CLI gives (`StoreArgument.schemes`); anything no scheme
/// claims is a directory.
public protocol StoreScheme: Sendable {
    /// Whether `argument` names a store of this kind (its scheme matches).
    func claims(_ argument: String) -> Bool
    /// Throws a `config` error for a malformed argument of this kind.
    func check(_ argument: String) throws
    /// Opens the store, checking once that it can be reached (a `config` error
    /// for a missing bucket or refused credentials, before anything is written).
    func open(_ argument: String, options: StoreOpenOptions) throws -> any StoreBackend
    /// Opens the store to read it (`ls`, `get`, `gc`, `verify`), creating nothing; the
    /// same checks as `open` (a `config` error for one that cannot be reached).
    func openInventory(_ argument: String, options: StoreOpenOptions) throws -> any StoreInventory
    /// Opens the location as backfill sources (`backfill s3://BUCKET/PREFIX`, a worker's
    /// `--sources`): nil for a scheme whose locations hold only stores.
    func openSources(_ argument: String, cloud: CloudSettings) throws -> (any ListedSources)?
}

extension StoreScheme {
    public func openSources(_ argument: String, cloud: CloudSettings) throws -> (any ListedSources)? { nil }
}

/// Sources a backfill lists and reads from a location of a scheme (the objects under a
/// bucket prefix), as `FileWalker` lists a directory's files.
public protocol ListedSources: SourceReader {
    /// Every source under the location, sorted by relative path, and how many were skipped
    /// ("directory" markers, dot-names).
    func list() throws -> (files: [FileWalker.Entry], skipped: Int)
}

/// What every store is opened with.
public struct StoreOpenOptions: Sendable {
    public var onConflict: ConflictPolicy
    /// A bucket that does not honour create-only writes is used anyway (see `S3Store.open`).
    public var allowUnconditionalWrites: Bool
    public var logger: Logger
    /// How a bucket is reached (`AWS_*` and the config file's `s3` section), as the
    /// configuration layer resolved them.
    public var cloud: CloudSettings

    public init(onConflict: ConflictPolicy = .refuse, allowUnconditionalWrites: Bool = false,
                logger: Logger = Logger(label: "snapthumb.store"), cloud: CloudSettings = CloudSettings()) {
        self.onConflict = onConflict
        self.allowUnconditionalWrites = allowUnconditionalWrites
        self.logger = logger
        self.cloud = cloud
    }
}

/// A `--store` (or source) argument: a directory path, or a URL of one of the
/// `schemes` given (the CLI gives the bucket's).
public enum StoreLocation {
    /// Throws a `config` error for anything that is neither a directory path nor a
    /// URL of a known scheme: another scheme (`gs://`, `http://`) or a malformed URL
    /// would otherwise be taken as a directory name and silently created.
    public static func check(_ argument: String, schemes: [any StoreScheme]) throws {
        if let scheme = scheme(for: argument, schemes: schemes) {
            try scheme.check(argument)
            return
        }
        guard !argument.isEmpty else { throw SnapError(.config, "the store is an empty string") }
        // Something that starts like a URL (`scheme:`) but is none we know.
        let scheme = argument.prefix { $0 != ":" && $0 != "/" }
        if argument.dropFirst(scheme.count).hasPrefix(":"), let first = scheme.first, first.isLetter,
           scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) {
            throw SnapError(.config, "\"\(RedactedURL.text(argument))\" is neither a directory path nor an s3://BUCKET/PREFIX URL (write ./\(RedactedURL.text(argument)) for a directory of that name)")
        }
    }

    /// The scheme that claims `argument`, or nil for a directory path.
    public static func scheme(for argument: String, schemes: [any StoreScheme]) -> (any StoreScheme)? {
        schemes.first { $0.claims(argument) }
    }

    /// Opens a store to read: an existing directory store (`DirectoryInventory`: a `config`
    /// error for a path that is not one, unless `requireLayout` is false) or a store of one
    /// of `schemes`. Nothing is created.
    public static func openInventory(_ argument: String, schemes: [any StoreScheme], options: StoreOpenOptions = StoreOpenOptions(),
                                     requireLayout: Bool = true) throws -> any StoreInventory {
        try check(argument, schemes: schemes)
        if let scheme = scheme(for: argument, schemes: schemes) {
            return try scheme.openInventory(argument, options: options)
        }
        return try DirectoryInventory(root: argument, requireLayout: requireLayout)
    }

    /// Opens `argument` as backfill sources of the scheme that claims it; nil for a directory
    /// path (read as local files) or a scheme that has no sources (a `config` error).
    public static func openSources(_ argument: String, schemes: [any StoreScheme], cloud: CloudSettings) throws -> (any ListedSources)? {
        try check(argument, schemes: schemes)
        guard let scheme = scheme(for: argument, schemes: schemes) else { return nil }
        guard let sources = try scheme.openSources(argument, cloud: cloud) else {
            throw SnapError(.config, "\(RedactedURL.text(argument)) holds stores only; backfill reads a directory or a bucket prefix")
        }
        return sources
    }

    /// Opens a store: a directory (created if missing) or a store of one of `schemes`.
    public static func open(_ argument: String, schemes: [any StoreScheme], options: StoreOpenOptions = StoreOpenOptions()) throws -> any StoreBackend {
        try check(argument, schemes: schemes)
        if let scheme = scheme(for: argument, schemes: schemes) {
            return try scheme.open(argument, options: options)
        }
        return try Store(root: argument, onConflict: options.onConflict)
    }
}
