import Foundation
import HTTPKit
import Synchronization
import Logging

/// An OAuth 2.0 access token and when it expires. `description` never shows the value.
public struct AccessToken: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The secret itself: send it as `Authorization: Bearer <value>`, never log it.
    public let value: String
    public let expiresAt: Date

    public init(value: String, expiresAt: Date) {
        self.value = value
        self.expiresAt = expiresAt
    }

    /// `Bearer <value>`, for an `Authorization` header (Pub/Sub's REST API, Cloud Storage's XML and JSON APIs).
    public var authorization: String { "Bearer \(value)" }
    public var description: String { "AccessToken(<redacted>, expires \(expiresAt))" }
    public var debugDescription: String { description }
}

/// Where access tokens come from: says how to ask for one and reads the answer.
/// The provider sends the request, so that one source serves threads and tasks alike.
public protocol AccessTokenSource: Sendable, CustomStringConvertible {
    /// The request for a fresh token at `now` (a JWT assertion carries its issue time).
    func tokenRequest(now: Date) throws -> HTTPRequest
    /// The token in the answer (status 200 only); throws `GoogleError` (`credentials`) otherwise.
    func token(from response: HTTPResponse, now: Date) throws -> AccessToken
}

/// An `AccessTokenSource` with a cache: hands out the same token until shortly before
/// it expires, then fetches another. Thread-safe; blocking and async calls share the cache.
public final class AccessTokenProvider: Sendable, CustomStringConvertible {
    public let source: any AccessTokenSource
    private let transport: HTTPTransport
    private let retry: GoogleRetryPolicy
    private let refreshMargin: Double
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let cache = TokenCache()

    /// - Parameters:
    ///   - refreshMargin: a token is replaced this many seconds before it expires (at most half
    ///     its lifetime before), so that no request goes out with one about to lapse.
    ///   - now: the clock (tests move it).
    public init(source: any AccessTokenSource, transport: HTTPTransport = HTTPTransport(timeout: 15),
                retry: GoogleRetryPolicy = GoogleRetryPolicy(attempts: 4), refreshMargin: Double = 300,
                now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "snapthumb.google.auth")) {
        self.source = source
        self.transport = transport
        self.retry = retry
        self.refreshMargin = refreshMargin
        self.now = now
        self.logger = logger
    }

    public var description: String { "access tokens from \(source)" }

    /// A token valid for a while yet; fetches one when there is none, blocking the calling
    /// thread (for thread-based callers such as the bucket store's client).
    public func blockingToken() throws -> AccessToken {
        if let token = cache.fresh(at: now()) { return token }
        return try retry.executor.run({ (_: Int) -> RetryStep<AccessToken, GoogleError> in
            let start = now()
            let request = try source.tokenRequest(now: start)
            let result: Result<HTTPResponse, any Error>
            do { result = .success(try transport.sendBlocking(request)) } catch { result = .failure(error) }
            return try handle(result, requestedAt: start)
        }, exhausted: { error, _ in try fallback(error) })
    }

    /// A token valid for a while yet; fetches one when there is none. Cancellable.
    public func token() async throws -> AccessToken {
        if let token = cache.fresh(at: now()) { return token }
        return try await retry.executor.run({ (_: Int) async throws -> RetryStep<AccessToken, GoogleError> in
            let start = now()
            let request = try source.tokenRequest(now: start)
            let result: Result<HTTPResponse, any Error>
            do { result = .success(try await transport.send(request)) } catch { result = .failure(error) }
            return try handle(result, requestedAt: start)
        }, exhausted: { error, _ in try fallback(error) })
    }

    /// When a refresh failed for a transient reason: the old token while it has a minute
    /// left (the refresh is tried again on the next call), else the failure.
    private func fallback(_ error: GoogleError?) throws -> AccessToken {
        let failure = error ?? GoogleError(.credentials, "\(source): no token")
        guard let token = cache.unexpired(at: now(), margin: 60) else { throw failure }
        logger.warning("cannot refresh the access token; using the current one until it expires", metadata: [
            "google.credentials": "\(source)", "error": "\(failure.message)", "google.token.expires": "\(token.expiresAt)"])
        return token
    }

    /// Forgets the cached token (after an API answered 401: it was revoked or is stale).
    public func invalidate() { cache.clear() }

    /// Token requests' classification: a dropped connection, a timeout and the statuses
    /// `GoogleRetry.isRetryable` names are retried; anything else is final.
    private func handle(_ result: Result<HTTPResponse, any Error>, requestedAt start: Date) throws -> RetryStep<AccessToken, GoogleError> {
        switch result {
        case .failure(let error as CancellationError):
            throw error
        case .failure(let error):
            let failure = GoogleError(.credentials, "\(source): \(HTTPTransport.describe(error))")
            guard HTTPTransport.isRetryable(error) else { throw failure }
            logger.debug("token request failed, retrying", metadata: ["google.credentials": "\(source)", "error": "\(failure.message)"])
            return .retry(failure, announce: false)
        case .success(let response) where GoogleRetry.isRetryable(status: response.status):
            return .retry(GoogleError(.credentials, "\(source): HTTP \(response.status)", status: response.status), announce: false)
        case .success(let response):
            let token = try source.token(from: response, now: start)
            let lifetime = token.expiresAt.timeIntervalSince(start)
            let refreshAt = start.addingTimeInterval(max(lifetime / 2, lifetime - refreshMargin))
            cache.store(token, refreshAt: refreshAt)
            logger.debug("access token obtained", metadata: ["google.credentials": "\(source)", "google.token.lifetime": "\(Int(lifetime))"])
            return .finished(token)
        }
    }
}

private final class TokenCache: Sendable {
    private struct State {
        var token: AccessToken?
        var refreshAt = Date.distantPast
    }
    private let state = Mutex(State())

    func fresh(at now: Date) -> AccessToken? {
        state.withLock { now < $0.refreshAt ? $0.token : nil }
    }

    func unexpired(at now: Date, margin: Double) -> AccessToken? {
        state.withLock { state in
            guard let token = state.token, now.addingTimeInterval(margin) < token.expiresAt else { return nil }
            return token
        }
    }

    func store(_ token: AccessToken, refreshAt: Date) {
        state.withLock { state in
            state.token = token
            state.refreshAt = refreshAt
        }
    }

    func clear() {
        state.withLock { state in
            state.token = nil
            state.refreshAt = .distantPast
        }
    }
}

/// The answer both token endpoints give: `{"access_token", "expires_in", "token_type"}`,
/// or an OAuth error `{"error", "error_description"}`.
enum TokenResponse {
    static func parse(_ response: HTTPResponse, from source: String, now: Date) throws -> AccessToken {
        let object = (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any]
        guard response.status == 200 else {
            var text = "\(source): HTTP \(response.status)"
            if let error = object?["error"] as? String {
                text += " \(error)"
                if let detail = object?["error_description"] as? String { text += ": \(detail)" }
            } else if let error = object?["error"] as? [String: Any], let message = error["message"] as? String {
                text += ": \(message)"
            }
            throw GoogleError(.credentials, text, status: response.status)
        }
        guard let object, let value = object["access_token"] as? String, !value.isEmpty else {
            throw GoogleError(.credentials, "\(source): the answer holds no access_token", status: response.status)
        }
        if let type = object["token_type"] as? String, type.lowercased() != "bearer" {
            throw GoogleError(.credentials, "\(source): token_type \(type), expected Bearer", status: response.status)
        }
        let lifetime = (object["expires_in"] as? NSNumber)?.doubleValue ?? 3600
        guard lifetime > 0 else { throw GoogleError(.credentials, "\(source): a token that has already expired", status: response.status) }
        return AccessToken(value: value, expiresAt: now.addingTimeInterval(lifetime))
    }
}
