import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SystemKit
import Synchronization

/// The bucket backend: the directory store's layout and bytes under
/// `s3://BUCKET/PREFIX`.
///
/// - A blob is PUT once by its content address (a PUT of the same bytes again
///   is harmless), with a checksum header so that the server refuses a damaged body.
/// - A manifest is PUT only after every one of its blobs is stored, create-only
///   (`If-None-Match: *`, or `x-goog-if-generation-match: 0` on GCS), and only
///   once the bucket has proved, in this process or its parent, that it refuses
///   an overwrite under that header (`proveConditionalWrites`). When one is
///   already there, `KeyConflict` (shared with the directory store) decides:
///   the same one again is a repeat; a new recipe for the same source replaces it
///   (only the version read, logged); other source bytes are a `conflict` unless
///   `onConflict` is `replace` (logged with both digests).
/// - Reads are checked: a body whose length is not its Content-Length, a
///   manifest that does not parse, is read again; only the same bytes twice
///   make a manifest unreadable (and then a `conflict` unless `replace`).
/// - What exists is remembered (`knownBlobs`): objects this process wrote, what
///   its parent passed on, and, after `prepareForBackfill`, everything a listing showed.
public final class S3Store: StoreBackend, Sendable {
    public let client: S3Client
    public let onConflict: ConflictPolicy
    /// Uploads in flight at once in a committer.
    public let concurrency: Int
    public let knownBlobs: KnownBlobs? = KnownBlobs()
    private let logger: Logger
    private struct State {
        /// Keys with a manifest; nil until a listing has been made (then a backfill
        /// asks `isKnownAbsent` and makes no request for an absent key).
        var knownManifests: Set<String>?
        var createOnly: CreateOnlyCheck
    }
    private let state: Mutex<State>
    /// Held while the create-only probe runs: other committer threads wait for its answer.
    private let probing = Mutex(())

    public init(client: S3Client, onConflict: ConflictPolicy = .refuse, concurrency: Int = 16, logger: Logger = Logger(label: "snapthumb.s3")) {
        self.client = client
        self.onConflict = onConflict
        self.concurrency = max(1, concurrency)
        self.logger = logger
        state = Mutex(State(createOnly: client.configuration.createOnlyCheck))
    }

    /// Opens `s3://BUCKET/PREFIX` with the resolved cloud settings and checks,
    /// once, that the bucket exists and the credentials are accepted (`config` error if not).
    /// - Parameter allowUnconditionalWrites: the operator accepts a bucket that may not
    ///   honour create-only writes (`--allow-unconditional-writes`): it is never probed.
    public static func open(_ url: String, cloud: CloudSettings, provider: S3Provider? = nil, pathStyle: Bool? = nil,
                            onConflict: ConflictPolicy = .refuse, allowUnconditionalWrites: Bool = false,
                            logger: Logger = Logger(label: "snapthumb.s3")) throws -> S3Store {
        var configuration = try S3Configuration(url: url, cloud: cloud, provider: provider, pathStyle: pathStyle)
        if allowUnconditionalWrites { configuration.createOnlyCheck = .unchecked }
        let store = S3Store(client: S3Client(configuration: configuration, retry: S3RetryPolicy(attempts: configuration.maxAttempts), logger: logger), onConflict: onConflict, logger: logger)
        try store.client.checkAccess()
        return store
    }

    var configuration: S3Configuration { client.configuration }
    public var location: String { configuration.location }
    public var directory: String? { nil }
    /// The store for a worker process, with what this one proved (`create-only=proven`).
    public var workerArgument: String {
        configuration.workerURL(createOnly: state.withLock { $0.createOnly })
    }

    func blobKey(_ hex: String) -> String { configuration.prefix + StoreLayout.blobPath(hex) }
    func manifestKey(_ key: String) -> String { configuration.prefix + StoreLayout.manifestPath(key) }

    /// The manifest file's bytes, exactly as the directory store writes them.
    static func manifestBytes(_ manifest: Manifest) -> [UInt8] { [UInt8](manifest.json(pretty: true)) + [0x0A] }

    /// The published manifest, or nil when there is none or it is unreadable
    /// (read twice, the same bytes, not a manifest). A transfer that went wrong is
    /// retried; one that keeps going wrong throws `store`.
    public func manifest(for key: String) throws -> Manifest? {
        try StoreKey.validate(key)
        if case .manifest(let manifest, _) = try readManifest(manifestKey(key)) { return manifest }
        return nil
    }

    enum ManifestRead {
        case absent
        case manifest(Manifest, S3Response)
        /// The same bytes twice, not a manifest.
        case unreadable(S3Response)
    }

    func readManifest(_ objectKey: String) throws -> ManifestRead {
        switch try client.readChecked(objectKey, check: { (try? Manifest.decode($0)) != nil }) {
        case .absent: return .absent
        case .good(let response): return .manifest(try Manifest.decode(response.body), response)
        case .bad(let response): return .unreadable(response)
        }
    }

    public func isKnownAbsent(_ key: String) -> Bool {
        state.withLock { $0.knownManifests.map { !$0.contains(key) } ?? false }
    }

    public func prepareForBackfill() throws {
        let manifestsPrefix = configuration.prefix + StoreLayout.manifests + "/"
        let manifests = try client.list(prefix: manifestsPrefix).compactMap { object -> String? in
            guard object.key.hasSuffix(".json") else { return nil }
            return String(object.key.dropFirst(manifestsPrefix.count).dropLast(".json".count))
        }
        let blobs = try client.list(prefix: configuration.prefix + StoreLayout.blobs + "/").compactMap { object -> String? in
            let name = object.key.split(separator: "/").last.map(String.init) ?? ""
            return name.count == 64 && object.size > 0 ? name : nil
        }
        state.withLock { $0.knownManifests = Set(manifests) }
        knownBlobs?.insert(contentsOf: blobs)
    }

    // MARK: Create-only, proven

    /// The probe object: a blob like any other (its name is the SHA-256 of these
    /// bytes), so that verify, listings and the layout need no exception for it.
    static let probeBytes = [UInt8]("SnapThumb's create-only probe: written once per store, then PUT again under the create-only header, which must be refused.\n".utf8)
    public static let probeHex = SHA256.hex(probeBytes)

    /// Proves, once per process, that the bucket refuses to overwrite an object
    /// under the create-only header: the probe blob is PUT create-only until the
    /// server refuses (at most twice: it creates, then must refuse). One PUT when
    /// the probe exists, two on a new prefix. A server that accepts the overwrite
    /// is a `config` error naming the header and the endpoint; nothing is published.
    public func proveConditionalWrites() throws {
        try probing.withLock { _ in
            guard state.withLock({ $0.createOnly }) == .probe else { return }
            let header = configuration.provider == .gcs ? "x-goog-if-generation-match: 0" : "If-None-Match: *"
            var answers: [Int] = []
            for _ in 0 ..< 2 {
                let response = try client.put(blobKey(Self.probeHex), body: Self.probeBytes, contentType: "text/plain; charset=utf-8", createOnly: true)
                if response.status == 412 {
                    state.withLock { $0.createOnly = .proven }
                    knownBlobs?.insert(contentsOf: [Self.probeHex])
                    return
                }
                answers.append(response.status)
            }
            throw SnapError(.config, "\(location) at \(configuration.endpoint.absoluteString): the server does not honour conditional writes: "
                + "a create-only PUT (\(header)) of an object that exists was accepted (HTTP \(answers.map(String.init).joined(separator: ", then "))), "
                + "so a published manifest could be overwritten without a word. Use a server that refuses it with 412 (AWS S3, MinIO, Ceph RGW, GCS with provider=gcs), "
                + "or accept the risk with --allow-unconditional-writes (SNAPTHUMB_ALLOW_UNCONDITIONAL_WRITES=true, store.allowUnconditionalWrites)")
        }
    }

    // MARK: Publishing

    @discardableResult
    public func commit(_ upload: ProcessedUpload) throws -> PublishOutcome {
        try StoreKey.validate(upload.manifest.key)
        try proveConditionalWrites()
        for blob in upload.blobs {
            guard let known = knownBlobs, known.claim(blob.hex) else { continue }
            var stored = false
            defer { known.finished(blob.hex, stored: stored) }
            _ = try client.put(blobKey(blob.hex), body: blob.bytes, contentType: Self.mediaType(blob.bytes))
            stored = true
        }
        return try publish(upload.manifest)
    }

    /// How an If-Match condition spells the ETag it was given. S3 compares the
    /// quoted form; Ceph RGW (and DigitalOcean Spaces) compare the header with the
    /// ETag they keep, without quotes, literally.
    enum ETagForm: String, Sendable {
        case quoted, bare

        func spell(_ etag: String) -> String {
            let bare = etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count >= 2 ? String(etag.dropFirst().dropLast()) : etag
            return self == .quoted ? "\"\(bare)\"" : bare
        }
    }

    /// Which form each endpoint took last: tried first next time (the other one
    /// only after a 412 on a version that did not change).
    private static let etagForms = Mutex<[String: ETagForm]>([:])

    /// The forms to try, the one this endpoint took before first.
    func etagForms() -> [ETagForm] {
        Self.etagForms.withLock { $0[configuration.endpoint.absoluteString] } == .bare ? [.bare, .quoted] : [.quoted, .bare]
    }

    private func publish(_ manifest: Manifest) throws -> PublishOutcome {
        let key = manifestKey(manifest.key)
        let bytes = Self.manifestBytes(manifest)
        // The version last refused, and the conditions it refused: a 412 on a
        // version that did not change is the server's answer to the condition.
        var refused: (version: String, tried: [String])?
        var versions = 0
        // Each version gets at most two tries and a vanished manifest another create: bounded all the same.
        for _ in 0 ..< 12 {
            let created = try client.put(key, body: bytes, contentType: "application/json", createOnly: true)
            if created.status != 412 {
                state.withLock { _ = $0.knownManifests?.insert(manifest.key) }
                return .created
            }
            // One is there already: read it, and decide.
            let existing: Manifest?, response: S3Response, decision: KeyConflict.Decision
            switch try readManifest(key) {
            case .absent: continue // deleted meanwhile: create again
            case .manifest(let m, let r):
                (existing, response) = (m, r)
                decision = KeyConflict.decide(existing: m, new: manifest, policy: onConflict)
            case .unreadable(let r):
                (existing, response) = (nil, r)
                decision = KeyConflict.decideUnreadable(key: manifest.key, bytes: r.body.count, policy: onConflict)
            }
            let previous: String?, outcome: PublishOutcome
            switch decision {
            case .keep: return .repeated
            case .refuse(let error): throw error
            case .rederive: (previous, outcome) = (nil, .rederived)
            case .overwrite(let p): (previous, outcome) = (p, p.map { .replaced(previous: $0) } ?? .created)
            }
            let etag = response.header("etag") ?? ""
            let generation = configuration.provider == .gcs ? response.header("x-goog-generation") : nil
            let version = generation ?? etag
            if refused?.version != version {
                versions += 1
                guard versions <= 4 else {
                    throw SnapError(.store, "\(location): manifest for \"\(manifest.key)\" changed \(versions - 1) times while being published (another writer); try again")
                }
                refused = (version, [])
                logger.notice("replacing a published manifest", metadata: [
                    "snap.key": "\(manifest.key)", "snap.store": "\(location)",
                    "snap.why": "\(previous != nil ? "other source bytes (--on-conflict replace)" : existing == nil ? "unreadable manifest (--on-conflict replace)" : "new recipe")",
                    "snap.old_source": "\(existing?.source.digest ?? "?")", "snap.new_source": "\(manifest.source.digest)",
                    "snap.old_recipe": "\(existing?.recipe.digest ?? "?")", "snap.new_recipe": "\(manifest.recipe.digest)"])
            }
            // Replace only the version just read: a concurrent writer's newer one is not overwritten blindly.
            let replaced: S3Response
            if let generation {
                guard refused?.tried.isEmpty ?? true else { throw refusal(manifest.key, etag: nil, generation: generation) }
                refused?.tried.append("generation")
                replaced = try client.put(key, body: bytes, contentType: "application/json", ifGeneration: generation)
            } else if etag.isEmpty {
                // The server gave no ETag: nothing to condition on.
                replaced = try client.put(key, body: bytes, contentType: "application/json")
            } else {
                guard let form = etagForms().first(where: { !(refused?.tried.contains($0.rawValue) ?? false) }) else {
                    throw refusal(manifest.key, etag: etag, generation: nil)
                }
                refused?.tried.append(form.rawValue)
                replaced = try client.put(key, body: bytes, contentType: "application/json", ifMatch: form.spell(etag))
                if replaced.status != 412 { Self.etagForms.withLock { $0[configuration.endpoint.absoluteString] = form } }
            }
            if replaced.status != 412 { return outcome }
        }
        throw SnapError(.store, "\(location): manifest for \"\(manifest.key)\" kept appearing and vanishing while being published (another writer); try again")
    }

    /// The server refused every spelling of the condition for a version that did
    /// not change: it will not replace this manifest, now or on a retry.
    private func refusal(_ key: String, etag: String?, generation: String?) -> SnapError {
        let condition = generation.map { "x-goog-if-generation-match: \($0)" } ?? "If-Match with its ETag \(etag ?? ""), quoted and unquoted,"
        return SnapError(.conflict, "\(location) at \(configuration.endpoint.absoluteString) refuses to replace the manifest of \"\(key)\": "
            + "a PUT with \(condition) of the version just read was answered 412 Precondition Failed although that version did not change, "
            + "so this server does not support replacing only the version read; the published manifest is kept")
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
}

/// Commits uploads on a pool of threads, `concurrency` at a time: the store's
/// round trips overlap each other and the workers' processing (a 20 ms round
/// trip must not serialise the pipeline). `submit` waits while 2 × concurrency are queued.
final class ConcurrentCommitter<Tag: Sendable>: UploadCommitter, Sendable {
    private let commit: @Sendable (ProcessedUpload) throws -> Void
    private let completion: @Sendable (Tag, ProcessedUpload, SnapError?) -> Void
    private struct State {
        var queue: [(Tag, ProcessedUpload)] = []
        var head = 0
        var closed = false
        var running: Int
    }
    private let monitor: Monitor<State>
    private let maxPending: Int

    init(concurrency: Int, commit: @escaping @Sendable (ProcessedUpload) throws -> Void, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) {
        self.commit = commit
        self.completion = completion
        monitor = Monitor(State(running: concurrency))
        maxPending = 2 * concurrency
        for i in 0 ..< concurrency {
            let thread = Thread { [self] in loop() }
            thread.name = "snapthumb-upload-\(i)"
            thread.start()
        }
    }

    func submit(_ upload: ProcessedUpload, tag: Tag) {
        monitor.withLock { locked in
            while locked.state.queue.count - locked.state.head >= maxPending && !locked.state.closed { locked.wait() }
            locked.state.queue.append((tag, upload))
            locked.broadcast()
        }
    }

    func flush() {}

    func finish() {
        monitor.withLock { locked in
            locked.state.closed = true
            locked.broadcast()
            while locked.state.running > 0 { locked.wait() }
        }
    }

    private func loop() {
        while true {
            let next: (Tag, ProcessedUpload)? = monitor.withLock { locked in
                while locked.state.head == locked.state.queue.count && !locked.state.closed { locked.wait() }
                if locked.state.head == locked.state.queue.count {
                    locked.state.running -= 1
                    locked.broadcast()
                    return nil
                }
                let next = locked.state.queue[locked.state.head]
                locked.state.head += 1
                if locked.state.head > 256 && locked.state.head * 2 > locked.state.queue.count {
                    locked.state.queue.removeFirst(locked.state.head)
                    locked.state.head = 0
                }
                locked.broadcast()
                return next
            }
            guard let next else { return }
            let (tag, upload) = next
            do {
                try commit(upload)
                completion(tag, upload, nil)
            } catch {
                completion(tag, upload, error as? SnapError ?? SnapError(.store, "\(error)"))
            }
        }
    }
}
