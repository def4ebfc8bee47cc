import Foundation

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
/// Every backend keeps the same layout and the same bytes under its root:
/// `blobs/sha256/<2 hex>/<64 hex>` written once by content address, and
/// `manifests/<key>.json` published only after all of its blobs, never half-written.
public protocol StoreBackend: Sendable {
    /// A directory path or `s3://BUCKET/PREFIX`: for messages and reports, never credentials.
    var location: String { get }
    /// What a `worker` process is given as `--store` to open this same store.
    var workerArgument: String { get }
    /// The directory that holds the store on this machine, if it is one.
    var directory: String? { get }
    /// The manifest published for `key`, or nil.
    func manifest(for key: String) throws -> Manifest?
    /// Stores the blobs, then publishes the manifest; blocks until both are durable.
    func commit(_ upload: ProcessedUpload) throws
    /// A committer for many uploads in a row (backfill, workers).
    func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag>
    /// Learns in bulk what the store already holds (a bucket lists it), so that a
    /// backfill does not ask about every key one at a time.
    func prepareForBackfill() throws
}

extension GroupCommitter: UploadCommitter {}

extension Store: StoreBackend {
    public var location: String { root }
    public var workerArgument: String { root }
    public var directory: String? { root }

    public func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag> {
        GroupCommitter<Tag>(store: self, maxDelay: maxDelay, completion: completion)
    }

    public func prepareForBackfill() throws {}
}

/// What publishing a manifest over one already there means. Shared by every
/// backend, so that a key means the same thing wherever it is stored.
public enum ManifestReplacement: Sendable, Equatable {
    /// The same manifest again: nothing to do.
    case identical
    /// The same source bytes under a new recipe: replace it (an explicit, logged act).
    case newRecipe
    /// Different source bytes under the same key.
    case differentSource

    public static func judge(existing: Manifest, new: Manifest) -> ManifestReplacement {
        if existing.source.digest != new.source.digest || existing.source.bytes != new.source.bytes { return .differentSource }
        return existing.recipe.digest == new.recipe.digest ? .identical : .newRecipe
    }
}
