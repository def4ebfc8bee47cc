import Foundation
import Synchronization
import SnapThumbCore
import SnapThumbStore

/// Which conditional header makes a write create-only.
public enum S3Provider: String, Sendable, Codable, CaseIterable {
    /// AWS S3, MinIO, moto, R2 and most others: `If-None-Match: *`.
    case s3
    /// Google Cloud Storage's XML API: `x-goog-if-generation-match: 0`.
    case gcs
}

/// Whether a store must first prove that the bucket refuses to overwrite an
/// object under the create-only header (`S3Store.proveConditionalWrites`).
public enum CreateOnlyCheck: String, Sendable, CaseIterable {
    /// Prove it before the first manifest is written (the default).
    case probe
    /// The process that started this one proved it (backfill and watch tell their workers).
    case proven
    /// The operator accepted the risk (`--allow-unconditional-writes`): never checked.
    case unchecked
}

/// Where a bucket store lives and how to reach it, from an `s3://BUCKET/PREFIX`
/// URL and the environment variables AWS users already have.
public struct S3Configuration: Sendable, CustomStringConvertible {
    public var bucket: String
    /// "" or ending in "/".
    public var prefix: String
    /// scheme://host[:port], no path.
    public var endpoint: URL
    public var region: String
    public var pathStyle: Bool
    public var provider: S3Provider
    public var credentials: S3Credentials
    /// Set when there is no HMAC key and the bucket takes bearer tokens instead (Google Cloud
    /// Storage's XML API with Google credentials): every request carries its `Authorization`
    /// header instead of a SigV4 signature; `credentials` is then empty.
    public var bearer: S3BearerAuthorization?
    /// Attempts per request, first one included (`AWS_MAX_ATTEMPTS`, as the AWS SDKs read it).
    public var maxAttempts: Int = 6
    /// Whether create-only writes must be proven first (`create-only=` on the URL).
    public var createOnlyCheck: CreateOnlyCheck = .probe

    /// `s3://BUCKET/PREFIX` without credentials: safe to print.
    public var location: String { "s3://\(bucket)/\(prefix)" }
    public var description: String { "\(location) at \(endpoint.absoluteString) (region \(region), \(pathStyle ? "path" : "virtual-host")-style, provider \(provider.rawValue))" }

    /// Splits `s3://BUCKET/PREFIX`; nil when the string is not an s3 URL.
    public static func parseURL(_ string: String) throws -> (bucket: String, prefix: String)? {
        guard string.lowercased().hasPrefix("s3://") else { return nil }
        if RedactedURL.hasUserinfo(string) {
            throw SnapError(.config, "\"\(RedactedURL.text(string))\": credentials do not belong in a store or source URL (they would show in process lists and logs): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) instead")
        }
        let rest = string.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        guard bucket.count >= 3, bucket.count <= 63,
              bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }) else {
            throw SnapError(.config, "\"\(RedactedURL.text(string))\": not a bucket name (3-63 lower-case letters, digits, '-', '.')")
        }
        var prefix = String(rest.dropFirst(bucket.count)).drop { $0 == "/" }.description
        if !prefix.isEmpty && !prefix.hasSuffix("/") { prefix += "/" }
        if prefix.split(separator: "/", omittingEmptySubsequences: false).dropLast().contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            throw SnapError(.config, "\"\(RedactedURL.text(string))\": the prefix has an empty, '.' or '..' segment")
        }
        return (bucket, prefix)
    }

    /// - Parameters:
    ///   - url: `s3://BUCKET/PREFIX`.
    ///   - environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
    ///     `AWS_REGION` then `AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL_S3` then `AWS_ENDPOINT_URL`,
    ///     `SNAPTHUMB_S3_PATH_STYLE` (1/true), `SNAPTHUMB_S3_PROVIDER` (s3/gcs).
    ///   - provider, pathStyle: from the command line or config file; win over the environment.
    public init(url fullURL: String, environment: [String: String], provider: S3Provider? = nil, pathStyle: Bool? = nil) throws {
        // Options may ride along as a query: s3://BUCKET/PREFIX?provider=gcs&path-style=true
        // (how a backfill hands its store to its worker processes).
        let pieces = fullURL.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let url = String(pieces[0])
        var provider = provider
        var pathStyle = pathStyle
        var createOnlyCheck = CreateOnlyCheck.probe
        if pieces.count > 1 {
            for option in pieces[1].split(separator: "&") {
                let nv = option.split(separator: "=", maxSplits: 1).map(String.init)
                switch (nv.first ?? "", nv.count > 1 ? nv[1] : "") {
                case ("provider", let value):
                    guard let p = S3Provider(rawValue: value) else { throw SnapError(.config, "\(RedactedURL.text(url)): provider=\(value): expected s3 or gcs") }
                    if provider == nil { provider = p }
                case ("path-style", let value):
                    guard let b = Bool(value) else { throw SnapError(.config, "\(RedactedURL.text(url)): path-style=\(value): expected true or false") }
                    if pathStyle == nil { pathStyle = b }
                case ("create-only", let value):
                    guard let check = CreateOnlyCheck(rawValue: value) else { throw SnapError(.config, "\(RedactedURL.text(url)): create-only=\(value): expected probe, proven or unchecked") }
                    createOnlyCheck = check
                default:
                    throw SnapError(.config, "\(RedactedURL.text(url)): unknown option \"\(option)\" (provider=s3|gcs, path-style=true|false)")
                }
            }
        }
        guard let (bucket, prefix) = try Self.parseURL(url) else { throw SnapError(.config, "\"\(RedactedURL.text(url))\" is not an s3:// URL") }
        self.bucket = bucket
        self.prefix = prefix
        self.createOnlyCheck = createOnlyCheck
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let text = value("AWS_MAX_ATTEMPTS") {
            guard let n = Int(text), n >= 1 else { throw SnapError(.config, "AWS_MAX_ATTEMPTS=\(text): expected a whole number of at least 1") }
            maxAttempts = n
        }
        region = value("AWS_REGION") ?? value("AWS_DEFAULT_REGION") ?? "us-east-1"
        let endpointString = value("AWS_ENDPOINT_URL_S3") ?? value("AWS_ENDPOINT_URL") ?? "https://s3.\(region).amazonaws.com"
        guard let parsed = URLComponents(string: endpointString), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = parsed.host, !host.isEmpty,
              parsed.user == nil, parsed.password == nil else {
            throw SnapError(.config, "endpoint \"\(endpointString)\" is not an http(s)://host[:port] URL")
        }
        var components = URLComponents()
        components.scheme = scheme
        components.host = host
        components.port = parsed.port
        endpoint = components.url!
        if let provider {
            self.provider = provider
        } else if let name = value("SNAPTHUMB_S3_PROVIDER") {
            guard let p = S3Provider(rawValue: name.lowercased()) else {
                throw SnapError(.config, "SNAPTHUMB_S3_PROVIDER=\(name): expected s3 or gcs")
            }
            self.provider = p
        } else {
            self.provider = .s3
        }
        let forced: Bool?
        if let pathStyle { forced = pathStyle } else if let text = value("SNAPTHUMB_S3_PATH_STYLE") {
            switch text.lowercased() {
            case "1", "true", "yes", "on": forced = true
            case "0", "false", "no", "off": forced = false
            default: throw SnapError(.config, "SNAPTHUMB_S3_PATH_STYLE=\(text): expected true or false")
            }
        } else { forced = nil }
        // An IP address or localhost has no per-bucket DNS names; a bucket with dots breaks TLS names.
        self.pathStyle = forced ?? (Self.isAddressOrLocalhost(host) || (scheme == "https" && bucket.contains(".")))
        if let key = value("AWS_ACCESS_KEY_ID"), let secret = value("AWS_SECRET_ACCESS_KEY") {
            credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN"))
        } else if let bearer = try S3BearerAuthorization.fallback(environment: environment, provider: self.provider) {
            // No HMAC key: the bucket is reached with the tokens of the environment's Google credentials.
            credentials = S3Credentials(accessKeyID: "", secretAccessKey: "")
            self.bearer = bearer
        } else {
            throw SnapError(.config, "\(RedactedURL.text(url)): no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones); for Google Cloud Storage, an HMAC key the same way, or Google credentials (GOOGLE_APPLICATION_CREDENTIALS, or the metadata server with provider gcs; docs/google.md)")
        }
    }

    static func isAddressOrLocalhost(_ host: String) -> Bool {
        let h = host.lowercased()
        if h == "localhost" || h.hasSuffix(".localhost") { return true }
        if h.contains(":") { return true } // IPv6
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Is this store argument an s3 URL (anything else must be a directory path)?
    public static func isS3URL(_ string: String) -> Bool { string.lowercased().hasPrefix("s3://") }
}

/// Authorization other than SigV4: an `Authorization` header value for each request.
/// Google Cloud Storage's XML API takes `Bearer <OAuth 2.0 access token>`. This module
/// knows nothing of where tokens come from: the program installs a maker once at start
/// (``install(_:)``; `snapthumb` installs Google's Application Default Credentials),
/// used when the environment has no HMAC key. `description` names the source, never a token.
public struct S3BearerAuthorization: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Where the tokens come from, for messages and logs (never a token).
    public let source: String
    private let header: @Sendable () throws -> String
    private let refused: @Sendable () -> Void

    /// - Parameters:
    ///   - header: the `Authorization` value for the next request (`Bearer …`), fetching a
    ///     token when needed; throws when none can be had (its message must hold no secret).
    ///   - refused: called after the server answered 401 (the token was revoked or went stale),
    ///     so that the next `header()` fetches a new one.
    public init(source: String, header: @escaping @Sendable () throws -> String, refused: @escaping @Sendable () -> Void = {}) {
        self.source = source
        self.header = header
        self.refused = refused
    }

    public func authorization() throws -> String { try header() }
    public func wasRefused() { refused() }

    public var description: String { "bearer tokens (\(source))" }
    public var debugDescription: String { description }

    /// Makes the authorization for an environment without an HMAC key, or nil when it has
    /// no credentials of that kind either (`provider`: the bucket's, `gcs` or `s3`).
    public typealias Maker = @Sendable (_ environment: [String: String], _ provider: S3Provider) throws -> S3BearerAuthorization?

    private static let installed = InstalledMaker()

    /// Installs the maker (once, at start, before any bucket is opened; a later call replaces it).
    public static func install(_ maker: Maker?) { installed.set(maker) }

    static func fallback(environment: [String: String], provider: S3Provider) throws -> S3BearerAuthorization? {
        try installed.get()?(environment, provider)
    }
}

private final class InstalledMaker: Sendable {
    private let maker = Mutex<S3BearerAuthorization.Maker?>(nil)
    func set(_ m: S3BearerAuthorization.Maker?) { maker.withLock { $0 = m } }
    func get() -> S3BearerAuthorization.Maker? { maker.withLock { $0 } }
}
