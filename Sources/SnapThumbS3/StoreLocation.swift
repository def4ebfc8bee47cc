import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SystemKit

/// The bucket store's scheme (`s3://BUCKET/PREFIX`), for `StoreLocation`.
public struct S3StoreScheme: StoreScheme {
    public init() {}

    public func claims(_ argument: String) -> Bool { S3Configuration.isS3URL(argument) }

    public func check(_ argument: String) throws {
        _ = try S3Configuration.parseURL(String(argument.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]))
    }

    public func open(_ argument: String, options: StoreOpenOptions) throws -> any StoreBackend {
        try S3Store.open(argument, cloud: options.cloud, onConflict: options.onConflict,
                         allowUnconditionalWrites: options.allowUnconditionalWrites, logger: options.logger)
    }
}

/// Backfill sources that are objects under `s3://BUCKET/PREFIX`.
public struct S3Sources: SourceReader {
    public let client: S3Client

    public init(url: String, cloud: CloudSettings) throws {
        let configuration = try S3Configuration(url: url, cloud: cloud)
        client = S3Client(configuration: configuration, retry: S3RetryPolicy(attempts: configuration.maxAttempts))
    }

    public var workerArgument: String? {
        client.configuration.workerURL(createOnly: .probe)
    }

    /// Every object under the prefix, as backfill entries: the key relative to the
    /// prefix is the upload's key; "directory" markers and dot-names are skipped.
    public func list() throws -> (files: [(relativePath: String, path: String, size: Int)], skipped: Int) {
        try client.checkAccess()
        let prefix = client.configuration.prefix
        var files: [(String, String, Int)] = []
        var skipped = 0
        for object in try client.list(prefix: prefix) {
            let relative = String(object.key.dropFirst(prefix.count))
            if relative.isEmpty || PathBytes.endsWithSlash(relative) || PathBytes.segments(relative).contains(where: PathBytes.isHidden) {
                skipped += 1
                continue
            }
            files.append((relative, "s3://\(client.configuration.bucket)/\(object.key)", object.size))
        }
        return (files.sorted { $0.0 < $1.0 }, skipped)
    }

    public func read(_ path: String, limit: Int) throws -> SourceBuffer {
        let bucketPrefix = "s3://\(client.configuration.bucket)/"
        guard path.hasPrefix(bucketPrefix) else { throw SnapError(.internal, "\(path) is not in \(bucketPrefix)") }
        guard let (body, _) = try client.get(String(path.dropFirst(bucketPrefix.count))) else {
            throw SnapError(.io, "\(path): no longer in the bucket")
        }
        guard body.count <= limit else {
            throw SnapError(.tooLarge, "input is \(body.count) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
        }
        return SourceBuffer([UInt8](body))
    }

    /// Reads the generation a notification announced (`?generation=N`, Cloud Storage's XML
    /// API; signed with the request) and checks its bytes against the size and MD5 given:
    /// - that generation is gone (replaced by a newer one, or deleted): `superseded`; the
    ///   newer generation's own notification makes its thumbnails;
    /// - the bytes differ: read again (a cut or damaged transfer is transient); the same
    ///   wrong bytes twice are `unreadable` (what is stored is not what was announced),
    ///   different wrong bytes every time outlast the retries as `store` (retried later).
    public func read(_ path: String, limit: Int, expecting expected: SourceExpectation) throws -> SourceBuffer {
        let bucketPrefix = "s3://\(client.configuration.bucket)/"
        guard path.hasPrefix(bucketPrefix) else { throw SnapError(.internal, "\(path) is not in \(bucketPrefix)") }
        let key = String(path.dropFirst(bucketPrefix.count))
        let named = expected.generation.map { "\(path) generation \($0)" } ?? path
        // Announced as too large: refused before a byte is read, as a listed object would be.
        if let size = expected.size, size > Int64(limit) {
            throw SnapError(.tooLarge, "input is \(size) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
        }
        switch try client.readChecked(key, query: expected.generation.map { [("generation", String($0))] } ?? [], check: { expected.mismatch(in: $0) == nil }) {
        case .good(let response):
            guard response.body.count <= limit else {
                throw SnapError(.tooLarge, "input is \(response.body.count) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
            }
            return SourceBuffer([UInt8](response.body))
        case .absent:
            guard let generation = expected.generation else { throw SnapError(.io, "\(path): no longer in the bucket") }
            // Which generation is live now says why the announced one is gone.
            guard let live = try client.headers(key) else {
                throw SnapError(.superseded, "\(named) was deleted before it was read")
            }
            if let text = live.header("x-goog-generation"), let current = Int64(text), current > generation {
                throw SnapError(.superseded, "\(named) was replaced by generation \(current) before it was read")
            }
            throw SnapError(.io, "\(named): not found, though the object is there (\(live.header("x-goog-generation").map { "generation \($0)" } ?? "no generation given")); retried later")
        case .bad(let response):
            if let generation = expected.generation, let text = response.header("x-goog-generation"), let served = Int64(text), served > generation {
                // A server that ignored `generation` and sent the live object: a newer one.
                throw SnapError(.superseded, "\(named) was replaced by generation \(served) before it was read")
            }
            let what = expected.mismatch(in: response.body) ?? "the bytes differ"
            throw SnapError(.unreadable, "\(named): \(what); read twice, the same bytes: the object is not what its notification announced")
        }
    }
}
