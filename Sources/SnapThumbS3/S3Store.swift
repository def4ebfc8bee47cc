import Foundation
import Logging
import SnapThumbCore

/// The bucket backend: the directory store's layout and bytes under
/// `s3://BUCKET/PREFIX`.
///
/// - A blob is PUT once by its content address (a PUT of the same bytes again
///   is harmless), with a checksum header so that the server refuses a damaged body.
/// - A manifest is PUT only after every one of its blobs is stored, create-only
///   (`If-None-Match: *`, or `x-goog-if-generation-match: 0` on GCS). When one is
///   already there, `KeyConflict.decide` (shared with the directory store) decides:
///   the same one again is a repeat; a new recipe for the same source replaces it
///   (only the version read, logged); other source bytes are a `conflict` unless
///   `onConflict` is `replace` (logged with both digests).
/// - What exists is remembered: objects this process wrote, and, after
///   `prepareForBackfill`, everything a listing showed.
public final class S3Store: StoreBackend, @unchecked Sendable {
    public let client: S3Client
    public let onConflict: ConflictPolicy
    /// Uploads in flight at once in a committer.
    public let concurrency: Int
    private let logger: Logger
    private let lock = NSLock()
    private var knownBlobs: Set<String> = []
    /// Keys with a manifest; nil until a listing has been made (then a backfill
    /// asks `isKnownAbsent` and makes no request for an absent key).
    private var knownManifests: Set<String>?

    public init(client: S3Client, onConflict: ConflictPolicy = .refuse, concurrency: Int = 16, logger: Logger = Logger(label: "snapthumb.s3")) {
        self.client = client
        self.onConflict = onConflict
        self.concurrency = max(1, concurrency)
        self.logger = logger
    }

    /// Opens `s3://BUCKET/PREFIX` with the environment's configuration and checks,
    /// once, that the bucket exists and the credentials are accepted (`config` error if not).
    public static func open(_ url: String, environment: [String: String], provider: S3Provider? = nil, pathStyle: Bool? = nil,
                            onConflict: ConflictPolicy = .refuse, logger: Logger = Logger(label: "snapthumb.s3")) throws -> S3Store {
        let configuration = try S3Configuration(url: url, environment: environment, provider: provider, pathStyle: pathStyle)
        let store = S3Store(client: S3Client(configuration: configuration, retry: S3RetryPolicy(attempts: configuration.maxAttempts), logger: logger), onConflict: onConflict, logger: logger)
        try store.client.checkAccess()
        return store
    }

    var configuration: S3Configuration { client.configuration }
    public var location: String { configuration.location }
    public var directory: String? { nil }
    public var workerArgument: String {
        var options: [String] = []
        if configuration.provider != .s3 { options.append("provider=\(configuration.provider.rawValue)") }
        options.append("path-style=\(configuration.pathStyle)")
        return location + "?" + options.joined(separator: "&")
    }

    func blobKey(_ hex: String) -> String { "\(configuration.prefix)blobs/sha256/\(hex.prefix(2))/\(hex)" }
    func manifestKey(_ key: String) -> String { "\(configuration.prefix)manifests/\(key).json" }

    /// The manifest file's bytes, exactly as the directory store writes them.
    static func manifestBytes(_ manifest: Manifest) -> [UInt8] { [UInt8](manifest.json(pretty: true)) + [0x0A] }

    public func manifest(for key: String) throws -> Manifest? {
        try StoreKey.validate(key)
        guard let (body, _) = try client.get(manifestKey(key)) else { return nil }
        return try? Manifest.decode(body)
    }

    public func isKnownAbsent(_ key: String) -> Bool {
        locked { knownManifests.map { !$0.contains(key) } ?? false }
    }

    public func prepareForBackfill() throws {
        let manifestsPrefix = configuration.prefix + "manifests/"
        let manifests = try client.list(prefix: manifestsPrefix).compactMap { object -> String? in
            guard object.key.hasSuffix(".json") else { return nil }
            return String(object.key.dropFirst(manifestsPrefix.count).dropLast(".json".count))
        }
        let blobs = try client.list(prefix: configuration.prefix + "blobs/sha256/").compactMap { object -> String? in
            let name = object.key.split(separator: "/").last.map(String.init) ?? ""
            return name.count == 64 && object.size > 0 ? name : nil
        }
        locked {
            knownManifests = Set(manifests)
            knownBlobs.formUnion(blobs)
        }
    }

    @discardableResult
    public func commit(_ upload: ProcessedUpload) throws -> PublishOutcome {
        try StoreKey.validate(upload.manifest.key)
        for blob in upload.blobs where !locked({ knownBlobs.contains(blob.hex) }) {
            _ = try client.put(blobKey(blob.hex), body: blob.bytes, contentType: Self.mediaType(blob.bytes))
            locked { _ = knownBlobs.insert(blob.hex) }
        }
        return try publish(upload.manifest)
    }

    private func publish(_ manifest: Manifest) throws -> PublishOutcome {
        let key = manifestKey(manifest.key)
        let bytes = Self.manifestBytes(manifest)
        for _ in 0 ..< 4 {
            let created = try client.put(key, body: bytes, contentType: "application/json", createOnly: true)
            if created.status != 412 {
                locked { knownManifests?.insert(manifest.key) }
                return .created
            }
            // One is there already: read it, and decide.
            guard let (body, etag) = try client.get(key) else { continue } // deleted meanwhile: create again
            let existing = try? Manifest.decode(body)
            let previous: String?, outcome: PublishOutcome
            switch KeyConflict.decide(existing: existing, new: manifest, policy: onConflict) {
            case .keep: return .repeated
            case .refuse(let error): throw error
            case .rederive: (previous, outcome) = (nil, .rederived)
            case .overwrite(let p): (previous, outcome) = (p, p.map { .replaced(previous: $0) } ?? .created)
            }
            logger.notice("replacing a published manifest", metadata: [
                "snap.key": "\(manifest.key)", "snap.store": "\(location)",
                "snap.why": "\(previous != nil ? "other source bytes (--on-conflict replace)" : existing == nil ? "unreadable manifest" : "new recipe")",
                "snap.old_source": "\(existing?.source.digest ?? "?")", "snap.new_source": "\(manifest.source.digest)",
                "snap.old_recipe": "\(existing?.recipe.digest ?? "?")", "snap.new_recipe": "\(manifest.recipe.digest)"])
            // Replace only the version just read: a concurrent writer's newer one is not overwritten blindly.
            let replaced = try client.put(key, body: bytes, contentType: "application/json", ifMatch: etag.isEmpty ? nil : etag)
            if replaced.status != 412 { return outcome }
        }
        throw SnapError(.store, "\(location): manifest for \"\(manifest.key)\" kept changing while being published; try again")
    }

    /// What a blob is, for the object's Content-Type (readers download thumbnails directly).
    static func mediaType(_ bytes: [UInt8]) -> String {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "image/png" }
        if bytes.count > 12, bytes[4 ..< 8].elementsEqual("ftyp".utf8) { return "image/avif" }
        return "application/octet-stream"
    }

    public func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag> {
        ConcurrentCommitter<Tag>(concurrency: concurrency, commit: { [self] in _ = try commit($0) }, completion: completion)
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}

/// Commits uploads on a pool of threads, `concurrency` at a time: the store's
/// round trips overlap each other and the workers' processing (a 20 ms round
/// trip must not serialise the pipeline). `submit` waits while 2 × concurrency are queued.
final class ConcurrentCommitter<Tag: Sendable>: UploadCommitter, @unchecked Sendable {
    private let commit: @Sendable (ProcessedUpload) throws -> Void
    private let completion: @Sendable (Tag, ProcessedUpload, SnapError?) -> Void
    private let condition = NSCondition()
    private var queue: [(Tag, ProcessedUpload)] = []
    private var head = 0
    private var closed = false
    private var running: Int
    private let maxPending: Int

    init(concurrency: Int, commit: @escaping @Sendable (ProcessedUpload) throws -> Void, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) {
        self.commit = commit
        self.completion = completion
        running = concurrency
        maxPending = 2 * concurrency
        for i in 0 ..< concurrency {
            let thread = Thread { [self] in loop() }
            thread.name = "snapthumb-upload-\(i)"
            thread.start()
        }
    }

    func submit(_ upload: ProcessedUpload, tag: Tag) {
        condition.lock()
        while queue.count - head >= maxPending && !closed { condition.wait() }
        queue.append((tag, upload))
        condition.broadcast()
        condition.unlock()
    }

    func flush() {}

    func finish() {
        condition.lock()
        closed = true
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while head == queue.count && !closed { condition.wait() }
            if head == queue.count {
                running -= 1
                condition.broadcast()
                condition.unlock()
                return
            }
            let (tag, upload) = queue[head]
            head += 1
            if head > 256 && head * 2 > queue.count { queue.removeFirst(head); head = 0 }
            condition.broadcast()
            condition.unlock()
            do {
                try commit(upload)
                completion(tag, upload, nil)
            } catch {
                completion(tag, upload, error as? SnapError ?? SnapError(.store, "\(error)"))
            }
        }
    }
}
