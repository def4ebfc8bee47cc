import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request (to a bucket, a queue, or a Google endpoint).
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    public var headers: [(String, String)]
    public var body: Data?

    public init(method: String, url: URL, headers: [(String, String)] = [], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// One answer: status, headers (lower-cased names), body.
public struct HTTPResponse: Sendable {
    public let status: Int
    public let headers: [String: String]
    public let body: Data

    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// The one HTTP client of the program: Foundation's URLSession (libcurl underneath:
/// connections kept alive and reused, several requests in flight from several threads),
/// with no cache and no cookies. The bucket store, the SQS client and the Google clients
/// all send through it; each decides what is safe to repeat (`RetryPolicy` says how long
/// to wait, `isRetryable(_:)` which connection failures a later try may not meet).
/// Callable from threads (blocking, optionally cancellable) and from tasks (a cancelled
/// task cancels its request).
public final class HTTPTransport: Sendable {
    private let session: URLSession

    /// - Parameters:
    ///   - timeout: seconds without a byte before a request fails as timed out (a request
    ///     may set its own).
    ///   - resourceTimeout: seconds a whole request may take, if limited.
    ///   - maxConnections: connections kept per host.
    public init(timeout: Double = 30, resourceTimeout: Double? = nil, maxConnections: Int = 8) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = maxConnections
        configuration.timeoutIntervalForRequest = timeout
        if let resourceTimeout { configuration.timeoutIntervalForResource = resourceTimeout }
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        session = URLSession(configuration: configuration)
    }

    deinit { session.invalidateAndCancel() }

    /// Sends the request and blocks the calling thread until the answer (or a `URLError`).
    public func sendBlocking(_ request: HTTPRequest, timeout: Double? = nil) throws -> HTTPResponse {
        try start(request, timeout: timeout).wait().get()
    }

    /// Starts the request: `wait()` blocks for its answer, `cancel()` (from any thread)
    /// ends it early with `URLError(.cancelled)`.
    public func start(_ request: HTTPRequest, timeout: Double? = nil) -> HTTPCall {
        let box = Box()
        let task = makeTask(request, timeout: timeout) { box.set($0) }
        task.resume()
        return HTTPCall(task: task, box: box)
    }

    /// Sends the request; cancelling the calling task cancels it (`CancellationError`).
    public func send(_ request: HTTPRequest, timeout: Double? = nil) async throws -> HTTPResponse {
        let holder = TaskHolder()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<HTTPResponse, any Error>) in
                let task = makeTask(request, timeout: timeout) { result in
                    switch result {
                    case .success(let response): continuation.resume(returning: response)
                    case .failure(let error as URLError) where error.code == .cancelled: continuation.resume(throwing: CancellationError())
                    case .failure(let error): continuation.resume(throwing: error)
                    }
                }
                holder.start(task)
            }
        } onCancel: {
            holder.cancel()
        }
    }

    private func makeTask(_ request: HTTPRequest, timeout: Double?, completion: @escaping @Sendable (Result<HTTPResponse, any Error>) -> Void) -> URLSessionDataTask {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        if let timeout { urlRequest.timeoutInterval = timeout }
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = request.body
        return session.dataTask(with: urlRequest) { data, response, error in
            if let error {
                completion(.failure(error))
            } else if let http = response as? HTTPURLResponse {
                var headers: [String: String] = [:]
                for (name, value) in http.allHeaderFields {
                    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                }
                completion(.success(HTTPResponse(status: http.statusCode, headers: headers, body: data ?? Data())))
            } else {
                completion(.failure(URLError(.badServerResponse)))
            }
        }
    }

    /// Failures of the connection that a later try may not meet.
    public static func isRetryable(_ error: any Error) -> Bool {
        guard let error = error as? URLError else { return false }
        switch error.code {
        case .timedOut, .cannotConnectToHost, .networkConnectionLost, .notConnectedToInternet, .cannotFindHost,
             .dnsLookupFailed, .badServerResponse, .zeroByteResource, .cannotParseResponse, .resourceUnavailable,
             .secureConnectionFailed, .unknown:
            return true
        default:
            return false
        }
    }

    /// A few words for a connection failure (never the URL, nor anything of the request).
    public static func describe(_ error: any Error) -> String {
        if let error = error as? URLError {
            switch error.code {
            case .timedOut: return "timed out"
            case .cannotConnectToHost: return "connection refused"
            case .cannotFindHost, .dnsLookupFailed: return "host not found"
            case .networkConnectionLost: return "connection lost"
            case .cancelled: return "cancelled"
            default: return "network error \(error.code.rawValue)"
            }
        }
        if error is CancellationError { return "cancelled" }
        return "\(type(of: error))"
    }
}

/// A request under way, from `HTTPTransport.start`.
public struct HTTPCall: Sendable {
    fileprivate let task: URLSessionDataTask
    fileprivate let box: Box

    /// Blocks until the answer, or the failure (`URLError(.cancelled)` after `cancel()`).
    public func wait() -> Result<HTTPResponse, any Error> { box.wait() }

    public func cancel() { task.cancel() }
}

/// The waiting half of a blocking send.
private final class Box: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let result = Mutex<Result<HTTPResponse, any Error>?>(nil)
    func set(_ r: Result<HTTPResponse, any Error>) {
        result.withLock { $0 = r }
        semaphore.signal()
    }
    func wait() -> Result<HTTPResponse, any Error> {
        semaphore.wait()
        return result.withLock { $0! }
    }
}

/// The task of an async send, so that cancellation (which may come first) reaches it.
private final class TaskHolder: Sendable {
    private struct State {
        var task: URLSessionDataTask?
        var cancelled = false
    }
    private let state = Mutex(State())

    func start(_ task: URLSessionDataTask) {
        let cancelled = state.withLock { state in
            state.task = task
            return state.cancelled
        }
        task.resume()
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state in
            state.cancelled = true
            return state.task
        }
        task?.cancel()
    }
}
