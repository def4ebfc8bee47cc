import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import HTTPKit
import Logging
import SnapThumbCore
import SnapThumbStore
import SystemKit
import Synchronization

/// One object of a listing.
public struct S3Object: Sendable, Equatable {
    /// The full key (with the store's prefix).
    public let key: String
    public let size: Int
    public let etag: String
    /// Last-Modified, seconds since 1970 (0 when the listing has none).
    public var lastModified: Double = 0
}

/// An answer from the server: status, the headers we use, the body.
public struct S3Response: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: Data
    /// The body was longer than the request allowed (`maxBody`): it was not read, `body` is empty.
    public let bodyOverLimit: Bool

    public init(status: Int, headers: [String: String], body: Data, bodyOverLimit: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyOverLimit = bodyOverLimit
    }

    init(_ response: HTTPResponse) {
        self.init(status: response.status, headers: response.headers, body: response.body, bodyOverLimit: response.bodyOverLimit)
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
    /// The Content-Length the answer announced, if any (and if it speaks of the body as sent: no Content-Encoding).
    public var contentLength: Int? {
        if let encoding = header("content-encoding"), !encoding.isEmpty, encoding.lowercased() != "identity" { return nil }
        return header("content-length").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }
    /// `<Error><Code>` of an S3 error document, if any.
    public var errorCode: String? { S3XML.firstValue(of: "Code", in: body) }
    var errorMessage: String? { S3XML.firstValue(of: "Message", in: body) }
}

/// How hard to retry: capped exponential backoff with full jitter (as the AWS SDKs do),
/// the program's one `RetryPolicy`.
public typealias S3RetryPolicy = RetryPolicy

/// A small S3 client over the program's `HTTPTransport` (libcurl's easy interface, opened with dlopen:
/// connections kept alive and reused; several requests in flight from several threads). Calls
/// block the calling thread; every request is signed with Signature Version 4 (or carries
/// the configuration's bearer token, `S3Configuration.bearer`) and retried on timeouts,
/// refused or dropped connections, 5xx and 503 SlowDown.
public final class S3Client: Sendable {
    public let configuration: S3Configuration
    public let retry: S3RetryPolicy
    private let signer: SigV4Signer
    private let transport: HTTPTransport
    private let logger: Logger
    private let counter = RequestCounter()

    /// - Parameters:
    ///   - retry: how often a request is tried (`RetryExecutor`); `timeouts`: how long each try may take.
    public init(configuration: S3Configuration, retry: S3RetryPolicy = S3RetryPolicy(), timeouts: RequestTimeouts = RequestTimeouts(),
                maxConnections: Int = 32, logger: Logger = Logger(label: "snapthumb.s3")) {
        self.configuration = configuration
        self.retry = retry
        self.logger = logger
        signer = SigV4Signer(credentials: configuration.credentials, region: configuration.region)
        transport = HTTPTransport(timeouts: timeouts, maxConnections: maxConnections)
    }

    /// The retry loop of every request of this client (`retry` on the monotonic clock).
    var executor: RetryExecutor { retry.executor }

    /// Requests sent so far (each retry counts), for "requests per image".
    public var requestsSent: Int { counter.value }

    // MARK: Operations

    /// PUT an object. `createOnly` adds the provider's create-only condition
    /// (a 412 answer then means "already there"); `ifMatch` replaces only that version.
    /// Every body carries a checksum the server checks: `x-amz-checksum-sha256`
    /// on S3, `Content-MD5` on Google Cloud Storage.
    /// `ifGeneration` (Google Cloud Storage) replaces only that generation.
    public func put(_ key: String, body: [UInt8], contentType: String, createOnly: Bool = false, ifMatch: String? = nil,
                    ifGeneration: String? = nil) throws -> S3Response {
        var (headers, hex) = putHeaders(body: body, contentType: contentType, createOnly: createOnly, ifMatch: ifMatch)
        if let ifGeneration { headers.append(("x-goog-if-generation-match", ifGeneration)) }
        return try send("PUT", key: key, headers: headers, body: body, payloadHash: hex, accept: [200, 201, 204, 412])
    }

    /// A PUT's headers (before signing) and its payload hash, per provider.
    func putHeaders(body: [UInt8], contentType: String, createOnly: Bool, ifMatch: String?) -> ([(String, String)], String) {
        let digest = SHA256.digest(body)
        var headers: [(String, String)] = [("Content-Type", contentType)]
        switch configuration.provider {
        case .s3: headers.append(("x-amz-checksum-sha256", Data(digest).base64EncodedString()))
        case .gcs: headers.append(("Content-MD5", Data(MD5.digest(body)).base64EncodedString()))
        }
        if createOnly {
            switch configuration.provider {
            case .s3: headers.append(("If-None-Match", "*"))
            case .gcs: headers.append(("x-goog-if-generation-match", "0"))
            }
        }
        if let ifMatch { headers.append(("If-Match", ifMatch)) }
        let hex = digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return (headers, hex)
    }

    /// The object's bytes and ETag, or nil when there is none.
    public func get(_ key: String) throws -> (body: Data, etag: String)? {
        try fetch(key).map { ($0.body, $0.header("etag") ?? "") }
    }

    /// The object's whole answer (its headers: ETag, a GCS generation), or nil when there is none.
    /// A body shorter or longer than its Content-Length was retried (see `send`).
    /// `query` picks a version: `generation=N` on Google Cloud Storage (`versionId=…` on S3);
    /// it is signed with the request. `maxBody`: a body longer than that many bytes is not
    /// read (its Content-Length is checked first); the answer comes back with `bodyOverLimit`.
    public func fetch(_ key: String, query: [(String, String)] = [], maxBody: Int? = nil) throws -> S3Response? {
        let response = try send("GET", key: key, query: query, accept: [200, 404], maxBody: maxBody)
        return response.status == 200 ? response : nil
    }

    /// How a checked read ended.
    public enum CheckedRead: Sendable {
        /// There is no such object.
        case absent
        /// A body that passed the check.
        case good(S3Response)
        /// A body that failed the check, and the next read gave the very same
        /// bytes: what is stored, not a transfer that went wrong.
        case bad(S3Response)
    }

    /// GETs an object until its body passes `check` (a blob hashes to its name, a
    /// manifest parses). A body that fails it is read again, after the retry
    /// policy's backoff: a broken cache or a truncating middlebox is transient.
    /// Only the same failing bytes twice in a row are `bad`; bodies that fail
    /// differently every time outlast the retries and throw `store`.
    public func readChecked(_ key: String, query: [(String, String)] = [], check: (Data) -> Bool) throws -> CheckedRead {
        var previous: Data?
        return try executor.with(attempts: max(2, retry.attempts)).run({ (attempt: Int) -> RetryStep<CheckedRead, Void> in
            guard let response = try fetch(key, query: query) else { return .finished(.absent) }
            if check(response.body) { return .finished(.good(response)) }
            if let previous, previous == response.body { return .finished(.bad(response)) }
            previous = response.body
            logger.debug("s3 read failed its check, reading again", metadata: ["key": "\(key)", "attempt": "\(attempt)", "bytes": "\(response.body.count)"])
            return .retry((), announce: false)
        }, exhausted: { _, attempts in
            throw SnapError(.store, "\(configuration.location): GET \(key): read \(attempts) times, a different body each time and never a good one; try again")
        })
    }

    /// Whether the object exists.
    public func head(_ key: String) throws -> Bool {
        try send("HEAD", key: key, accept: [200, 404]).status == 200
    }

    /// The live object's headers (a GCS generation in `x-goog-generation`), or nil when there is none.
    public func headers(_ key: String) throws -> S3Response? {
        let response = try send("HEAD", key: key, accept: [200, 404])
        return response.status == 200 ? response : nil
    }

    public func delete(_ key: String) throws {
        _ = try send("DELETE", key: key, accept: [200, 204, 404])
    }

    /// Every object under `prefix` (ListObjectsV2, 1000 a page, all pages).
    public func list(prefix: String) throws -> [S3Object] {
        var objects: [S3Object] = []
        var token: String?
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix)]
            if let token { query.append(("continuation-token", token)) }
            let response = try send("GET", key: nil, query: query, accept: [200])
            let page = try S3XML.listPage(response.body)
            objects += page.objects
            token = page.truncated ? page.nextToken : nil
            if page.truncated && token == nil { throw SnapError(.store, "\(configuration.location): a truncated listing without a continuation token") }
        } while token != nil
        return objects
    }

    /// Checks once that the bucket exists and these credentials may use it:
    /// throws `config` (a start-up error) when not, `io` when the server cannot be reached.
    public func checkAccess() throws {
        let response = try send("GET", key: nil, query: [("list-type", "2"), ("max-keys", "1"), ("prefix", configuration.prefix)], accept: [200, 301, 400, 401, 403, 404])
        switch response.status {
        case 200: return
        case 404: throw SnapError(.config, "\(configuration.location): no such bucket (\(response.errorCode ?? "404"))")
        case 401 where configuration.bearer != nil, 403 where configuration.bearer != nil:
            throw SnapError(.config, "\(configuration.location): access refused to \(configuration.bearer!.source) (\(describe(response))); check the account's IAM roles on the bucket (docs/google.md)")
        case 403: throw SnapError(.config, "\(configuration.location): access refused (\(describe(response))); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the bucket's policy")
        default: throw SnapError(.config, "\(configuration.location): \(describe(response)) (check AWS_REGION and the endpoint)")
        }
    }

    // MARK: Requests

    /// The URL and the Host header for a key (nil: the bucket itself).
    func target(_ key: String?) -> (url: String, host: String, path: String) {
        let endpoint = configuration.endpoint
        var host = endpoint.host ?? ""
        if let port = endpoint.port { host += ":\(port)" }
        var path = ""
        if configuration.pathStyle {
            path = "/\(configuration.bucket)" + (key.map { "/" + $0 } ?? "/")
        } else {
            host = "\(configuration.bucket).\(host)"
            path = "/" + (key ?? "")
        }
        return ("\(endpoint.scheme ?? "https")://\(host)", host, path)
    }

    /// Sends a signed request, retrying transient failures. Statuses in `accept`
    /// are answers; any other is an error (`config` for 401/403, else `io`).
    @discardableResult
    /// `maxBody`: an answer whose body is longer is not read (see `HTTPRequest.maxBodyBytes`)
    /// and comes back with `bodyOverLimit` when its status is accepted; never retried.
    public func send(_ method: String, key: String?, query: [(String, String)] = [], headers extra: [(String, String)] = [],
                     body: [UInt8] = [], payloadHash: String = SigV4Signer.emptyPayloadHash, accept: Set<Int>,
                     maxBody: Int? = nil) throws -> S3Response {
        let (base, host, path) = target(key)
        var tokenRefused = false
        let what = "\(configuration.location): \(method) \(key ?? "/")"
        return try executor.run({ (_: Int) -> RetryStep<S3Response, String> in
            let signed = try authorize(SigV4Signer.Request(method: method, path: path, query: query, headers: [("Host", host)] + extra, payloadHash: payloadHash))
            let queryString = query.map { "\(SigV4Signer.uriEncode($0.0, keepSlash: false))=\(SigV4Signer.uriEncode($0.1, keepSlash: false))" }.joined(separator: "&")
            guard let url = URL(string: base + SigV4Signer.uriEncode(path, keepSlash: true) + (queryString.isEmpty ? "" : "?" + queryString)) else {
                throw SnapError(.config, "\(configuration.location): cannot make a URL for \(key ?? "the bucket")")
            }
            let request = HTTPRequest(method: method, url: url,
                                      headers: signed.filter { $0.0.lowercased() != "host" } + [("User-Agent", Self.userAgent)],
                                      body: !body.isEmpty || method == "PUT" ? Data(body) : nil, maxBodyBytes: maxBody)
            counter.increment()
            switch transport.start(request).wait().map(S3Response.init) {
            case .failure(let error):
                let failure = HTTPTransport.describe(error)
                guard HTTPTransport.isRetryable(error) else { throw SnapError(.store, "\(what): \(failure)") }
                return .retry(failure)
            case .success(let response):
                // A body cut short (or padded) on the way is transient, like a dropped connection.
                // (One not read for being over the cap has nothing to compare.)
                let damaged = method == "HEAD" || response.bodyOverLimit ? nil : Self.lengthProblem(response)
                if damaged == nil, response.status == 401, let bearer = configuration.bearer, !tokenRefused {
                    // A revoked or stale token: ask for a new one, once (the attempt counts).
                    bearer.wasRefused()
                    tokenRefused = true
                    return .retry(describe(response), announce: false)
                }
                if damaged == nil, accept.contains(response.status) { return .finished(response) }
                let failure = damaged ?? describe(response)
                if damaged == nil, response.status == 401 || response.status == 403 {
                    throw SnapError(.store, "\(what) refused: \(failure)")
                }
                guard damaged != nil || Self.isRetryable(response) else { throw SnapError(.store, "\(what): \(failure)") }
                return .retry(failure)
            }
        }, retrying: { attempt, failure in
            logger.debug("s3 request failed, retrying", metadata: ["method": "\(method)", "key": "\(key ?? "/")", "attempt": "\(attempt)", "error": "\(failure)"])
        }, exhausted: { failure, attempts in
            throw SnapError(.store, "\(what) failed \(attempts) times: \(failure ?? "")")
        })
    }

    /// S3's answers worth another try: timeouts, throttling (429, 503 SlowDown), the server's
    /// own failures, and a conditional write that met a concurrent one (409 ConditionalRequestConflict).
    static func isRetryable(_ response: S3Response) -> Bool {
        response.status >= 500 || response.status == 429 || response.status == 408
            || response.status == 409 && response.errorCode == "ConditionalRequestConflict"
    }

    /// The request's headers with its authorization: the bearer token when the configuration
    /// has one (no SigV4 headers then), else the SigV4 signature.
    func authorize(_ request: SigV4Signer.Request) throws -> [(String, String)] {
        guard let bearer = configuration.bearer else { return signer.sign(request, at: Date()) }
        do {
            return request.headers + [("Authorization", try bearer.authorization())]
        } catch {
            throw SnapError(.store, "\(configuration.location): \(request.method) \(request.path): no access token from \(bearer.source): \(SnapThumbCore.describe(error))")
        }
    }

    /// `snapthumb/<version>`, the version `--version` prints: what a server's logs show.
    public static let userAgent = "snapthumb/\(SnapThumbVersion.current)"

    /// Why a body cannot be what the server sent: its length is not the
    /// Content-Length the answer announced (nil when it is, or when the body was
    /// decoded on the way, so that the header speaks of other bytes).
    static func lengthProblem(_ response: S3Response) -> String? {
        guard let text = response.header("content-length"), let announced = Int(text.trimmingCharacters(in: .whitespaces)) else { return nil }
        if let encoding = response.header("content-encoding"), !encoding.isEmpty, encoding.lowercased() != "identity" { return nil }
        guard announced != response.body.count else { return nil }
        return "HTTP \(response.status) with a body of \(response.body.count) bytes where Content-Length said \(announced)"
    }

    /// Status, S3 error code and message; never the request's headers (which hold
    /// the key id) nor the body's echo of the string to sign.
    func describe(_ response: S3Response) -> String {
        var text = "HTTP \(response.status)"
        if let code = response.errorCode { text += " \(code)" }
        if let message = response.errorMessage { text += ": \(redact(message))" }
        return text
    }

    /// Removes anything of the credentials from text a server sent back.
    func redact(_ text: String) -> String {
        var text = text
        let credentials = configuration.credentials
        for secret in [credentials.secretAccessKey, credentials.sessionToken ?? "", credentials.accessKeyID] where secret.count >= 4 {
            text = text.replacingOccurrences(of: secret, with: "<redacted>")
        }
        return text
    }
}

final class RequestCounter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// The few XML documents S3 answers with, read with Foundation's XMLParser.
enum S3XML {
    struct ListPage {
        var objects: [S3Object] = []
        var truncated = false
        var nextToken: String?
    }

    static func listPage(_ data: Data) throws -> ListPage {
        let delegate = Collector()
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        guard parser.parse() else { throw SnapError(.store, "a bucket listing that is not XML") }
        return delegate.page
    }

    static func firstValue(of element: String, in data: Data) -> String? {
        guard !data.isEmpty else { return nil }
        let delegate = Collector()
        delegate.wanted = element
        let parser = XMLParser(data: data)
        parser.delegate = delegate
        _ = parser.parse()
        return delegate.found
    }

    final class Collector: NSObject, XMLParserDelegate {
        var page = ListPage()
        var wanted: String?
        var found: String?
        private var text = ""
        private var key = "", size = 0, etag = "", lastModified = 0.0
        private var inContents = false

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            text = ""
            if name == "Contents" { inContents = true; key = ""; size = 0; etag = ""; lastModified = 0 }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == wanted, found == nil { found = text }
            switch name {
            case "Key" where inContents: key = text
            case "Size" where inContents: size = Int(text) ?? 0
            case "ETag" where inContents: etag = text
            case "LastModified" where inContents: lastModified = S3XML.seconds(iso8601: text) ?? 0
            case "Contents":
                inContents = false
                page.objects.append(S3Object(key: key, size: size, etag: etag, lastModified: lastModified))
            case "IsTruncated": page.truncated = text == "true"
            case "NextContinuationToken": page.nextToken = text
            default: break
            }
            text = ""
        }
    }
}
