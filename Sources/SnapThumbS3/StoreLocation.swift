import Foundation
import HTTPKit
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

    public func open(_ argument: String, options: StoreOpenOptions) throws -> any StoreBackend { try bucket(argument, options) }

    /// The same store (its access checked once); its inventory is `S3Inventory.swift`'s.
    public func openInventory(_ argument: String, options: StoreOpenOptions) throws -> any StoreInventory { try bucket(argument, options) }

    /// The objects under the prefix, read as backfill sources.
    public func openSources(_ argument: String, cloud: CloudSettings) throws -> (any ListedSources)? {
        try S3Sources(url: argument, cloud: cloud)
    }

    private func bucket(_ argument: String, _ options: StoreOpenOptions) throws -> S3Store {
        try S3Store.open(argument, cloud: options.cloud, onConflict: options.onConflict,
                         allowUnconditionalWrites: options.allowUnconditionalWrites, logger: options.logger)
    }
}

/// Backfill sources that are objects under `s3://BUCKET/PREFIX`.
public struct S3Sources: ListedSources {
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
    public func list() throws -> (files: [FileWalker.Entry], skipped: Int) {
        try client.checkAccess()
        let prefix = client.configuration.prefix
        var files: [FileWalker.Entry] = []
        var skipped = 0
        for object in try client.list(prefix: prefix) {
            let relative = String(object.key.dropFirst(prefix.count))
            if relative.isEmpty || PathBytes.endsWithSlash(relative) || PathBytes.segments(relative).contains(where: PathBytes.isHidden) {
                skipped += 1
                continue
            }
            files.append(FileWalker.Entry(relativePath: relative, path: "s3://\(client.configuration.bucket)/\(object.key)", size: object.size))
        }
        return (files.sorted { $0.relativePath < $1.relativePath }, skipped)
    }

    public func read(_ path: String, limit: Int) throws -> SourceBuffer {
        let key = try objectKey(path)
        // Never more than `limit` bytes held: a Content-Length over it is refused before the body
        // is read, a body that runs past it (chunked, or longer than announced) is cut off there.
        guard let response = try client.fetch(key, maxBody: limit) else {
            throw SnapError(.io, "\(path): no longer in the bucket")
        }
        guard !response.bodyOverLimit, response.body.count <= limit else { throw Self.tooLarge(response, limit: limit) }
        return SourceBuffer(response.body)
    }

    /// The object key of `s3://bucket/key`.
    private func objectKey(_ path: String) throws -> String {
        let bucketPrefix = "s3://\(client.configuration.bucket)/"
        guard path.hasPrefix(bucketPrefix) else { throw SnapError(.internal, "\(path) is not in \(bucketPrefix)") }
        return String(path.dropFirst(bucketPrefix.count))
    }

    static func tooLarge(_ response: S3Response, limit: Int) -> SnapError {
        if let length = response.contentLength, length > limit {
            return SnapError(.tooLarge, "input is \(length) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
        }
        return SnapError(.tooLarge, "input is more than \(limit) bytes, over the limit (limits.maxInputBytes); not read past it")
    }

    /// Reads what a notification announced and checks its bytes against the size and MD5 given,
    /// never holding more than `limit` bytes:
    /// - announced larger than `limit`: `too-large` before a byte is read;
    /// - Cloud Storage: the generation named (`?generation=N`, signed with the request), read
    ///   with the announced size as the cap; that generation gone (replaced by a newer one, or
    ///   deleted): `superseded`, the newer generation's own notification makes its thumbnails;
    ///   a generation of another size (its Content-Length, or a body that runs past the
    ///   announced size): `unreadable` at once, never read whole nor twice;
    /// - the right size but another MD5: the server's own MD5 (`x-goog-hash`) says whether it is
    ///   what is stored (`unreadable` at once) or a transfer that went wrong (read again); without
    ///   it, the same wrong bytes twice are `unreadable`, different wrong bytes every time outlast
    ///   the retries as `store` (retried later);
    /// - S3 (an event gives the size only, no version is read): the object as it is now, under
    ///   `limit`; gone: `superseded` (deleted after its event; a new upload has an event of its own).
    ///   Another size than announced is not refused: the object was written again, and that
    ///   write's event finds these bytes a repeat.
    public func read(_ path: String, limit: Int, expecting expected: SourceExpectation) throws -> SourceBuffer {
        let key = try objectKey(path)
        let named = expected.generation.map { "\(path) generation \($0)" } ?? path
        // Announced as too large: refused before a byte is read, as a listed object would be.
        if let size = expected.size, size > Int64(limit) {
            throw SnapError(.tooLarge, "input is \(size) bytes, over the limit of \(limit) bytes (limits.maxInputBytes)")
        }
        // Bytes that cannot change (a generation), or whose digest is known: what was announced, exactly.
        let exact = expected.generation != nil || expected.md5 != nil
        let announced = exact ? expected.size.map { Int(max(0, $0)) } : nil
        let query = expected.generation.map { [("generation", String($0))] } ?? []
        var previousDigest: [UInt8]?
        return try client.executor.with(attempts: max(2, client.retry.attempts)).run({ (_: Int) -> RetryStep<SourceBuffer, Void> in
            guard let response = try client.fetch(key, query: query, maxBody: announced ?? limit) else {
                try gone(key: key, named: named, expected: expected)
            }
            // A server that ignored `generation` and sent the live object: a newer one.
            if let generation = expected.generation, let text = response.header("x-goog-generation"), let served = Int64(text), served > generation {
                if response.bodyOverLimit || expected.mismatch(in: response.body) != nil {
                    throw SnapError(.superseded, "\(named) was replaced by generation \(served) before it was read")
                }
            }
            if response.bodyOverLimit || (announced != nil && response.body.count != announced) {
                guard let announced else { throw Self.tooLarge(response, limit: limit) }
                let size = response.bodyOverLimit ? response.contentLength.map { "\($0) bytes" } ?? "more than \(announced) bytes" : "\(response.body.count) bytes"
                throw SnapError(.unreadable, "\(named): the object is \(size), the notification says \(announced); not read: the object is not what its notification announced")
            }
            guard let want = expected.md5 else { return .finished(SourceBuffer(response.body)) }
            let digest = MD5.digest(response.body)
            if digest == want { return .finished(SourceBuffer(response.body)) }
            if let stored = Self.storedMD5(response), stored != want {
                throw SnapError(.unreadable, "\(named): the \(response.body.count) bytes stored do not have the MD5 the notification gives (the server's own MD5 says so); the object is not what its notification announced")
            }
            if previousDigest == digest {
                throw SnapError(.unreadable, "\(named): the \(response.body.count) bytes read do not have the MD5 the notification gives; read twice, the same bytes: the object is not what its notification announced")
            }
            previousDigest = digest
            return .retry((), announce: false)
        }, exhausted: { _, attempts in
            throw SnapError(.store, "\(client.configuration.location): GET \(key): read \(attempts) times, a different body each time and never the one announced; try again")
        })
    }

    /// Why the object a notification named is not there (never returns).
    private func gone(key: String, named: String, expected: SourceExpectation) throws -> Never {
        guard let generation = expected.generation else {
            // S3 (no versions read): deleted after its event; a later upload has an event of its own.
            throw SnapError(.superseded, "\(named) was deleted before it was read")
        }
        // Which generation is live now says why the announced one is gone.
        guard let live = try client.headers(key) else {
            throw SnapError(.superseded, "\(named) was deleted before it was read")
        }
        if let text = live.header("x-goog-generation"), let current = Int64(text), current > generation {
            throw SnapError(.superseded, "\(named) was replaced by generation \(current) before it was read")
        }
        throw SnapError(.io, "\(named): not found, though the object is there (\(live.header("x-goog-generation").map { "generation \($0)" } ?? "no generation given")); retried later")
    }

    /// The MD5 the server says it stores (`x-goog-hash: crc32c=…,md5=…`), when it says.
    static func storedMD5(_ response: S3Response) -> [UInt8]? {
        guard let header = response.header("x-goog-hash") else { return nil }
        for part in header.split(separator: ",") {
            let item = part.trimmingCharacters(in: .whitespaces)
            guard item.hasPrefix("md5=") else { continue }
            return Data(base64Encoded: String(item.dropFirst(4))).map { [UInt8]($0) }
        }
        return nil
    }
}
