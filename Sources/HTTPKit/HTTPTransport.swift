import CHTTPShim
import Foundation
import Synchronization

/// One HTTP request (to a bucket, a queue, or a Google endpoint).
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [(String, String)]
    public var body: Data?
    /// The most bytes of the answer's body to hold (nil: no cap). An answer whose
    /// Content-Length is larger is not read at all, one that runs past it is cut off there:
    /// either way it comes back with its status and headers, no body, and `bodyOverLimit`.
    public var maxBodyBytes: Int?

    public init(method: String, url: URL, headers: [(String, String)] = [], body: Data? = nil, maxBodyBytes: Int? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.maxBodyBytes = maxBodyBytes
    }
}

/// One answer: status, headers (lower-cased names), body.
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: Data
    /// The body was longer than the request's `maxBodyBytes`: it was not read (`body` is empty).
    public let bodyOverLimit: Bool

    public init(status: Int, headers: [String: String] = [:], body: Data = Data(), bodyOverLimit: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyOverLimit = bodyOverLimit
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Why a request got no answer.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case timedOut, connectionRefused, hostNotFound, connectionLost, cancelled, tls, certificate, badURL, other
    }
    public let kind: Kind
    /// libcurl's words (never the URL).
    public let detail: String

    public init(_ kind: Kind, _ detail: String = "") {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { HTTPTransport.describe(self) }
}

/// The one HTTP client of the program: libcurl's easy interface, one blocking transfer
/// per call on the calling thread, waiting in poll(2), with connections, DNS answers and
/// TLS sessions shared between calls (kept alive and reused; several requests in flight
/// from several threads). No cache, no cookies, no redirects followed. (Foundation's
/// URLSession was used before: on Linux it spun a core for as long as a request was open,
/// a whole core per idle queue consumer during its 20 s long polls.)
/// The bucket store, the SQS client and the Google clients all send through it; each
/// decides what is safe to repeat (`RetryPolicy` says how long to wait,
/// `isRetryable(_:)` which failures a later try may not meet). Callable from threads
/// (blocking, cancellable from another thread) and from tasks (a cancelled task cancels
/// its request).
public final class HTTPTransport: Sendable {
    private let client: CurlClient
    private let timeout: Double
    private let resourceTimeout: Double?

    /// - Parameters:
    ///   - timeout: seconds without a byte (or to connect) before a request fails as timed
    ///     out (a request may set its own).
    ///   - resourceTimeout: seconds a whole request may take, if limited.
    ///   - maxConnections: connections kept open for reuse.
    public init(timeout: Double = 30, resourceTimeout: Double? = nil, maxConnections: Int = 8) {
        client = CurlClient(maxConnections: maxConnections)
        self.timeout = timeout
        self.resourceTimeout = resourceTimeout
    }

    /// Sends the request and blocks the calling thread until the answer (or an `HTTPError`).
    public func sendBlocking(_ request: HTTPRequest, timeout: Double? = nil) throws -> HTTPResponse {
        try start(request, timeout: timeout).wait().get()
    }

    /// The request, ready: `wait()` sends it on the calling thread and blocks for the answer;
    /// `cancel()` (from any thread, before or during `wait()`) ends it with `HTTPError.Kind.cancelled`.
    public func start(_ request: HTTPRequest, timeout: Double? = nil) -> HTTPCall {
        HTTPCall(client: client, request: request, idleTimeout: timeout ?? self.timeout, totalTimeout: resourceTimeout)
    }

    /// Sends the request on a thread of its own; cancelling the calling task cancels it
    /// (`CancellationError`).
    public func send(_ request: HTTPRequest, timeout: Double? = nil) async throws -> HTTPResponse {
        let call = start(request, timeout: timeout)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                let thread = Thread {
                    switch call.wait() {
                    case .success(let response): continuation.resume(returning: response)
                    case .failure(let error as HTTPError) where error.kind == .cancelled: continuation.resume(throwing: CancellationError())
                    case .failure(let error): continuation.resume(throwing: error)
                    }
                }
                thread.name = "snapthumb.http"
                thread.start()
            }
        } onCancel: {
            call.cancel()
        }
    }

    /// Failures of the connection that a later try may not meet.
    public static func isRetryable(_ error: any Error) -> Bool {
        guard let error = error as? HTTPError else { return false }
        switch error.kind {
        case .timedOut, .connectionRefused, .hostNotFound, .connectionLost, .tls, .other: return true
        case .cancelled, .certificate, .badURL: return false
        }
    }

    /// A few words for a connection failure (never the URL, nor anything of the request).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPError {
            switch error.kind {
            case .timedOut: return "timed out"
            case .connectionRefused: return "connection refused"
            case .hostNotFound: return "host not found"
            case .connectionLost: return "connection lost" + (error.detail.isEmpty ? "" : " (\(error.detail))")
            case .cancelled: return "cancelled"
            case .tls: return "TLS handshake failed" + (error.detail.isEmpty ? "" : " (\(error.detail))")
            case .certificate: return "the server's certificate is not trusted" + (error.detail.isEmpty ? "" : " (\(error.detail))")
            case .badURL: return "not a URL libcurl can send to"
            case .other: return "network error" + (error.detail.isEmpty ? "" : " (\(error.detail))")
            }
        }
        if error is CancellationError { return "cancelled" }
        return "\(type(of: error))"
    }
}

/// A request ready to go, from `HTTPTransport.start`.
public struct HTTPCall: Sendable {
    fileprivate let client: CurlClient
    fileprivate let transfer = CurlTransfer()
    fileprivate let request: HTTPRequest
    fileprivate let idleTimeout: Double
    fileprivate let totalTimeout: Double?

    /// Sends the request on the calling thread and blocks until the answer, or the failure
    /// (`HTTPError`; `.cancelled` after `cancel()`).
    public func wait() -> Result<HTTPResponse, any Error> {
        transfer.perform(client, request, idleTimeout: idleTimeout, totalTimeout: totalTimeout)
    }

    public func cancel() { transfer.cancel() }
}

/// The shared connection cache.
private final class CurlClient: Sendable {
    // @unchecked: libcurl's share object locks itself (the lock callbacks in http.c); the pointer never changes.
    private struct Handle: @unchecked Sendable { let pointer: OpaquePointer }
    private let handle: Handle

    init(maxConnections: Int) {
        guard let pointer = snap_http_client_new(maxConnections) else { fatalError("libcurl could not be initialised (out of memory)") }
        handle = Handle(pointer: pointer)
    }

    var pointer: OpaquePointer { handle.pointer }

    deinit { snap_http_client_free(handle.pointer) }
}

/// One transfer: its cancel flag (an atomic in C) and its answer.
private final class CurlTransfer: Sendable {
    // @unchecked: one thread performs; `cancel` from others is an atomic store in C.
    private struct Handle: @unchecked Sendable { let pointer: OpaquePointer }
    private let handle: Handle
    private let performing = Mutex(false)

    init() {
        guard let pointer = snap_http_transfer_new() else { fatalError("out of memory for an HTTP transfer") }
        handle = Handle(pointer: pointer)
    }

    deinit { snap_http_transfer_free(handle.pointer) }

    func cancel() { snap_http_transfer_cancel(handle.pointer) }

    func perform(_ client: CurlClient, _ request: HTTPRequest, idleTimeout: Double, totalTimeout: Double?) -> Result<HTTPResponse, any Error> {
        // A call is sent once: a second `wait()` on the same call would race its buffers.
        let first = performing.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard first else { return .failure(HTTPError(.other, "this call was already sent")) }
        let headerLines = request.headers.map { "\($0.0): \($0.1)" }
        let payload = request.body.map { [UInt8]($0) } ?? []
        var code: Int32 = 0
        let kind: Int32 = withCStrings(headerLines) { lines in
            payload.withUnsafeBufferPointer { bytes in
                snap_http_perform(client.pointer, handle.pointer, request.method, request.url.absoluteString, lines, headerLines.count,
                                  bytes.baseAddress, bytes.count, request.body == nil ? 0 : 1,
                                  Int(max(1, (idleTimeout * 1000).rounded(.up))), Int(((totalTimeout ?? 0) * 1000).rounded(.up)),
                                  request.maxBodyBytes.map { max(1, $0) } ?? 0, &code)
            }
        }
        guard kind == Int32(SNAP_HTTP_OK) else {
            return .failure(HTTPError(Self.kind(kind), String(cString: snap_http_error_text(code))))
        }
        var length = 0
        // The body's buffer becomes the Data's (no copy: a source object of up to --max-bytes is held once).
        let body = snap_http_take_body(handle.pointer, &length).map { Data(bytesNoCopy: $0, count: length, deallocator: .free) } ?? Data()
        let block = snap_http_headers(handle.pointer, &length).map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length), as: UTF8.self) } ?? ""
        return .success(HTTPResponse(status: snap_http_status(handle.pointer), headers: Self.headers(block), body: body,
                                     bodyOverLimit: snap_http_over_limit(handle.pointer) != 0))
    }

    /// "Name: value" lines after the status line, names lower-cased; a repeated name's values joined with ", ".
    static func headers(_ block: String) -> [String: String] {
        var headers: [String: String] = [:]
        for line in block.split(whereSeparator: { $0 == "\r\n" || $0 == "\n" || $0 == "\r" }).dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        return headers
    }

    static func kind(_ code: Int32) -> HTTPError.Kind {
        switch Int(code) {
        case Int(SNAP_HTTP_TIMED_OUT): return .timedOut
        case Int(SNAP_HTTP_CONNECTION_REFUSED): return .connectionRefused
        case Int(SNAP_HTTP_HOST_NOT_FOUND): return .hostNotFound
        case Int(SNAP_HTTP_CONNECTION_LOST): return .connectionLost
        case Int(SNAP_HTTP_CANCELLED): return .cancelled
        case Int(SNAP_HTTP_TLS): return .tls
        case Int(SNAP_HTTP_CERTIFICATE): return .certificate
        case Int(SNAP_HTTP_BAD_URL): return .badURL
        default: return .other
        }
    }
}

/// Calls `body` with the strings as a C array of C strings, valid only during the call.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
}
