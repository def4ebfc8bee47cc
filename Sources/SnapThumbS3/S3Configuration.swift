import Foundation
import Synchronization
import SnapThumbConfig
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
/// URL and the settings AWS users already have (`CloudSettings`: `AWS_*` variables first).
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
    /// The settings this was made from, with the URL's options applied (for the worker's URL).
    public private(set) var cloud: CloudSettings

    /// The URL a worker process opens to reach exactly this bucket: the resolved settings
    /// that are not secrets ride along as options (`region=`, `endpoint=`, …), so that a
    /// worker uses what its parent resolved from flags and the config file; the keys stay
    /// in the environment the worker inherits (never on a command line).
    public func workerURL(createOnly: CreateOnlyCheck) -> String {
        var options: [String] = []
        func add(_ name: String, _ value: String?) {
            if let value { options.append("\(name)=\(value.addingPercentEncoding(withAllowedCharacters: Self.optionCharacters) ?? value)") }
        }
        if provider != .s3 { add("provider", provider.rawValue) }
        add("path-style", String(pathStyle))
        if createOnly != .probe { add("create-only", createOnly.rawValue) }
        add("region", cloud.region?.value)
        add("endpoint", cloud.s3Endpoint?.value)
        add("max-attempts", cloud.maxAttempts.map(String.init))
        add("google-credentials", cloud.googleCredentials?.value)
        add("metadata-host", cloud.metadataHost?.value)
        return location + "?" + options.joined(separator: "&")
    }

    private static let optionCharacters = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~:/"))

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
    ///   - url: `s3://BUCKET/PREFIX`, with options as a query (`?provider=gcs&path-style=true`).
    ///   - cloud: credentials, region, endpoint, attempts, provider and path style as the
    ///     configuration layer resolved them (`CloudSettings`: `AWS_*`, `SNAPTHUMB_S3_*`, the
    ///     config file's `s3` section).
    ///   - provider, pathStyle: from the command line; win over `cloud` (the URL's options win over both).
    public init(url fullURL: String, cloud: CloudSettings, provider: S3Provider? = nil, pathStyle: Bool? = nil) throws {
        // Options may ride along as a query: s3://BUCKET/PREFIX?provider=gcs&path-style=true
        // (how a backfill hands its store to its worker processes).
        let pieces = fullURL.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let url = String(pieces[0])
        var provider = provider
        var pathStyle = pathStyle
        var createOnlyCheck = CreateOnlyCheck.probe
        var cloud = cloud
        if pieces.count > 1 {
            for option in pieces[1].split(separator: "&") {
                let nv = option.split(separator: "=", maxSplits: 1).map(String.init)
                let given = nv.count > 1 ? (nv[1].removingPercentEncoding ?? nv[1]) : ""
                let asGiven = ResolvedSetting(given, from: .flag("\(nv.first ?? "")= in the store URL"))
                switch (nv.first ?? "", given) {
                case ("provider", let value):
                    guard let p = S3Provider(rawValue: value) else { throw SnapError(.config, "\(RedactedURL.text(url)): provider=\(value): expected s3 or gcs") }
                    if provider == nil { provider = p }
                case ("path-style", let value):
                    guard let b = Bool(value) else { throw SnapError(.config, "\(RedactedURL.text(url)): path-style=\(value): expected true or false") }
                    if pathStyle == nil { pathStyle = b }
                case ("create-only", let value):
                    guard let check = CreateOnlyCheck(rawValue: value) else { throw SnapError(.config, "\(RedactedURL.text(url)): create-only=\(value): expected probe, proven or unchecked") }
                    createOnlyCheck = check
                case ("region", _): cloud.region = asGiven
                case ("endpoint", _): cloud.s3Endpoint = asGiven
                case ("google-credentials", _): cloud.googleCredentials = asGiven
                case ("metadata-host", _): cloud.metadataHost = asGiven
                case ("max-attempts", let value):
                    guard let n = Int(value), n >= 1 else { throw SnapError(.config, "\(RedactedURL.text(url)): max-attempts=\(value): expected a whole number of at least 1") }
                    cloud.maxAttempts = n
                default:
                    throw SnapError(.config, "\(RedactedURL.text(url)): unknown option \"\(option)\" (provider=s3|gcs, path-style=true|false, create-only=probe|proven|unchecked, region=, endpoint=, max-attempts=, google-credentials=, metadata-host=)")
                }
            }
        }
        guard let (bucket, prefix) = try Self.parseURL(url) else { throw SnapError(.config, "\"\(RedactedURL.text(url))\" is not an s3:// URL") }
        self.bucket = bucket
        self.prefix = prefix
        self.createOnlyCheck = createOnlyCheck
        self.cloud = cloud
        if let attempts = cloud.maxAttempts { maxAttempts = attempts }
        region = cloud.region?.value ?? "us-east-1"
        let endpointString = cloud.s3Endpoint?.value ?? "https://s3.\(region).amazonaws.com"
        guard let parsed = URLComponents(string: endpointString), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = parsed.host, !host.isEmpty,
              parsed.user == nil, parsed.password == nil else {
            let named = cloud.s3Endpoint.map { "\($0.source)" } ?? "the default endpoint"
            throw SnapError(.config, "endpoint \"\(endpointString)\" (\(named)) is not an http(s)://host[:port] URL")
        }
        var components = URLComponents()
        components.scheme = scheme
        components.host = host
        components.port = parsed.port
        endpoint = components.url!
        if let provider {
            self.provider = provider
        } else if let name = cloud.s3Provider {
            guard let p = S3Provider(rawValue: name.value.lowercased()) else {
                throw SnapError(.config, "\(name): expected s3 or gcs")
            }
            self.provider = p
        } else {
            self.provider = .s3
        }
        let forced = pathStyle ?? cloud.s3PathStyle
        // An IP address or localhost has no per-bucket DNS names; a bucket with dots breaks TLS names.
        self.pathStyle = forced ?? (Self.isAddressOrLocalhost(host) || (scheme == "https" && bucket.contains(".")))
        if let key = cloud.accessKeyID?.value, let secret = cloud.secretAccessKey?.value {
            credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: cloud.sessionToken?.value)
        } else if let bearer = try S3BearerAuthorization.fallback(cloud: cloud, provider: self.provider) {
            // No HMAC key: the bucket is reached with the tokens of the configured Google credentials.
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
/// used when the settings hold no HMAC key. `description` names the source, never a token.
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

    /// Makes the authorization for settings without an HMAC key, or nil when it has
    /// no credentials of that kind either (`provider`: the bucket's, `gcs` or `s3`).
    public typealias Maker = @Sendable (_ cloud: CloudSettings, _ provider: S3Provider) throws -> S3BearerAuthorization?

    private static let installed = InstalledMaker()

    /// Installs the maker (once, at start, before any bucket is opened; a later call replaces it).
    public static func install(_ maker: Maker?) { installed.set(maker) }

    static func fallback(cloud: CloudSettings, provider: S3Provider) throws -> S3BearerAuthorization? {
        try installed.get()?(cloud, provider)
    }
}

private final class InstalledMaker: Sendable {
    private let maker = Mutex<S3BearerAuthorization.Maker?>(nil)
    func set(_ m: S3BearerAuthorization.Maker?) { maker.withLock { $0 = m } }
    func get() -> S3BearerAuthorization.Maker? { maker.withLock { $0 } }
}
