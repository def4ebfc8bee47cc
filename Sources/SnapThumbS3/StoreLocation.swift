import Foundation
import Logging
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
        try S3Store.open(argument, environment: options.environment, onConflict: options.onConflict,
                         allowUnconditionalWrites: options.allowUnconditionalWrites, logger: options.logger)
    }
}

/// Backfill sources that are objects under `s3://BUCKET/PREFIX`.
public struct S3Sources: SourceReader {
    public let client: S3Client

    public init(url: String, environment: [String: String]) throws {
        let configuration = try S3Configuration(url: url, environment: environment)
        client = S3Client(configuration: configuration, retry: S3RetryPolicy(attempts: configuration.maxAttempts))
    }

    public var workerArgument: String? {
        let c = client.configuration
        return c.location + "?" + (c.provider != .s3 ? "provider=\(c.provider.rawValue)&" : "") + "path-style=\(c.pathStyle)"
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
}
