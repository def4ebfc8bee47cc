#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SystemKit

/// Takes processed uploads and reports each one once it is durably published,
/// so that the caller can go on with its next image meanwhile (`GroupCommitter`
/// for a directory, a pool of concurrent uploads for a bucket).
public protocol UploadCommitter<Tag>: AnyObject, Sendable {
    associatedtype Tag: Sendable
    /// Queues the upload (waiting while too many are queued); its completion runs
    /// once it is published or has failed, possibly on another thread.
    func submit(_ upload: ProcessedUpload, tag: Tag)
    /// Publishes what is queued without waiting to gather more.
    func flush()
    /// Publishes what is queued and returns when every completion has run.
    func finish()
}

/// Where thumbnails are kept: a directory (`Store`) or a bucket. The pipeline,
/// `watch` and `backfill` use only this, so they never know which one they write to.
///
/// A backend is three parts: this writer; an inventory (`StoreInventory`: list, read,
/// take out, verify) for `ls`, `get`, `gc` and `verify`; and the capabilities below,
/// each optional (their defaults are what a store without it does). Both parts are
/// opened by scheme (`StoreScheme`, `StoreLocation`).
///
/// Every backend keeps the same layout and the same bytes under its root
/// (`StoreLayout`): `blobs/sha256/<2 hex>/<64 hex>` written once by content address, and
/// `manifests/<key>.json` published only after all of its blobs, never half-written.
public protocol StoreWriter: Sendable {
    /// A directory path or `s3://BUCKET/PREFIX`: for messages and reports, never credentials.
    var location: String { get }
    /// The manifest published for `key`, or nil.
    func manifest(for key: String) throws -> Manifest?
    /// What a publish does when the key has a manifest of other source bytes
    /// (`KeyConflict.decide` is the one place that applies it, for every backend).
    var onConflict: ConflictPolicy { get }
    /// Stores the blobs, then publishes the manifest; blocks until both are durable.
    @discardableResult
    func commit(_ upload: ProcessedUpload) throws -> PublishOutcome
    /// A committer for many uploads in a row (backfill, workers).
    func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag>
}

/// A capability: a listing in bulk before a backfill (a bucket), so that it does not
/// ask about every key one at a time. Without it, every key is asked about.
public protocol BackfillListing: Sendable {
    /// Learns in bulk what the store already holds.
    func prepareForBackfill() throws
    /// True when `prepareForBackfill`'s listing showed no manifest for `key`
    /// (then there is no need to ask); false when unknown.
    func isKnownAbsent(_ key: String) -> Bool
}

extension BackfillListing {
    public func prepareForBackfill() throws {}
    public func isKnownAbsent(_ key: String) -> Bool { false }
}

/// A capability: the create-only proof, for a store whose refusal to overwrite a
/// manifest is the server's promise (a bucket), not the system's (link(2) in a directory).
public protocol CreateOnlyProof: Sendable {
    /// Proves, once per process, that the store refuses to overwrite a manifest
    /// it was told to create only; throws `config` when it does not (a bucket
    /// that ignores conditional writes). The default: nothing to prove.
    func proveConditionalWrites() throws
}

extension CreateOnlyProof {
    public func proveConditionalWrites() throws {}
}

/// A capability: what worker processes need to share this store.
public protocol WorkerPlumbing: Sendable {
    /// What a `worker` process is given as `--store` to open this same store
    /// (the default: `location`, for a store its scheme opens from that).
    var workerArgument: String { get }
    /// The directory that holds the store on this machine, if it is one (the default: none).
    var directory: String? { get }
    /// The blobs this process knows are stored, when the backend keeps track
    /// (a bucket: it asks nothing before writing one), so that a run's worker
    /// processes share what each listed or wrote; nil (the default) when it does not.
    var knownBlobs: KnownBlobs? { get }
}

extension WorkerPlumbing where Self: StoreWriter {
    public var workerArgument: String { location }
}

extension WorkerPlumbing {
    public var directory: String? { nil }
    public var knownBlobs: KnownBlobs? { nil }
}

/// A store the pipeline, `watch`, `backfill` and the workers write to: the writer
/// with its optional capabilities (a backend implements only those it has).
public protocol StoreBackend: StoreWriter, BackfillListing, CreateOnlyProof, WorkerPlumbing {}

/// Where a backfill reads its sources: files here, or objects in a bucket.
public protocol SourceReader: Sendable {
    /// Reads one source whole, refusing it (`too-large`) when it is over `limit` bytes.
    func read(_ path: String, limit: Int) throws -> SourceBuffer
    /// What a `worker` process is given as `--sources` to read the same way (nil: local files).
    var workerArgument: String? { get }
    /// Reads the exact version `expected` names (where the reader can) and checks the bytes
    /// against its size and MD5; a mismatch throws (see `SourceExpectation`).
    func read(_ path: String, limit: Int, expecting expected: SourceExpectation) throws -> SourceBuffer
}

extension SourceReader {
    /// Files have no versions: reads the path and checks the bytes once (`unreadable` when they differ).
    public func read(_ path: String, limit: Int, expecting expected: SourceExpectation) throws -> SourceBuffer {
        let source = try read(path, limit: limit)
        if let mismatch = expected.mismatch(in: source) {
            throw SnapError(.unreadable, "\(path): \(mismatch)")
        }
        return source
    }
}

/// Sources below one directory (the watch folder's), read without following a
/// symbolic link anywhere below it: each folder on the way is opened from the one
/// before with `O_NOFOLLOW`, and so is the file. A folder swapped for a symlink by a
/// writer of that directory is refused as a transient `io` failure (the upload is not
/// at fault; the daemon stops claiming until it is put right), never followed.
public struct ConfinedFiles: SourceReader {
    /// The directory (the operator's path: it may itself be a symlink).
    public let root: String
    /// The prefix of `--sources` that names a `ConfinedFiles` for a worker process.
    public static let scheme = "confined:"

    public init(root: String) { self.root = root }

    /// `confined:<root>` for a `--sources` argument, or nil when `argument` is another kind.
    public init?(workerArgument argument: String) {
        guard argument.hasPrefix(Self.scheme) else { return nil }
        root = String(argument.dropFirst(Self.scheme.count))
    }

    public var workerArgument: String? { Self.scheme + root }

    public func read(_ path: String, limit: Int) throws -> SourceBuffer {
        guard path.hasPrefix(root + "/") else { throw SnapError(.internal, "\(path) is not below \(root)") }
        var components = PathBytes.segments(String(path.dropFirst(root.utf8.count + 1)))
        guard let name = components.popLast(), !components.contains(where: { $0 == ".." || $0 == "." }), name != "..", name != "." else {
            throw SnapError(.internal, "\(path) is not a plain path below \(root)")
        }
        var directory: DirectoryHandle
        do { directory = try DirectoryHandle.open(root) } catch { throw SnapError.io("cannot open", root, errno: error.code) }
        for component in components {
            do { directory = try directory.subdirectory(component) } catch {
                let kind = directory.kind(of: component)
                if kind == .symbolicLink || (kind != nil && kind != .directory) {
                    throw SnapError(.io, "\(directory.path)/\(component) is no longer a directory (a symbolic link or a file was put in its place); it is never followed")
                }
                throw SnapError.io("cannot open directory", "\(directory.path)/\(component)", errno: error.code)
            }
        }
        switch directory.openFile(name) {
        case .success(let fd):
            defer { close(fd) }
            return try InputFile.read(fd: fd, display: path, limit: limit)
        case .failure(let error):
            if error.code == ELOOP, directory.kind(of: name) == .symbolicLink {
                throw SnapError(.unsupported, "\(path) is a symbolic link, not a regular file")
            }
            throw SnapError.source("cannot open", path, errno: error.code)
        }
    }
}

/// Sources that are files on this machine.
public struct LocalFiles: SourceReader {
    public init() {}
    public func read(_ path: String, limit: Int) throws -> SourceBuffer { try InputFile.read(path, limit: limit) }
    public var workerArgument: String? { nil }
}

extension GroupCommitter: UploadCommitter {}

/// The directory store: no listing before a backfill, nothing to prove (link(2) is
/// create-only), no blobs to track (a stored one is found on disk).
extension Store: StoreBackend {
    public var location: String { root }
    public var directory: String? { root }

    public func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag> {
        GroupCommitter<Tag>(store: self, maxDelay: maxDelay, completion: completion)
    }
}
