import Foundation
import FlyingFox
import FlyingSocks
import Logging
import Prometheus

/// A daemon's HTTP endpoints (`--listen`), the same for `watch` and `consume`:
///
/// - `GET /healthz`: 200 while the main loop turns, 503 once it has been stuck longer than the
///   watchdog interval (a liveness probe restarts the pod, as systemd's watchdog restarts the unit);
/// - `GET /readyz`: 200 once the start-up checks passed, 503 before and while draining;
/// - `GET /metrics`: the registry in Prometheus' text format, the very metrics the textfile holds.
///
/// Served by FlyingFox (a small HTTP/1.1 server on async sockets: its socket waits run on a
/// Dispatch queue, never blocking a cooperative thread); anything else is 404.
public final class DaemonEndpoints: Sendable {
    /// Where it listens, with the port the kernel chose for port 0.
    public let address: String
    private let server: HTTPServer
    private let task: Task<Void, Never>

    private init(address: String, server: HTTPServer, task: Task<Void, Never>) {
        self.address = address
        self.server = server
        self.task = task
    }

    /// Binds and starts serving; throws (with the address in the message) when the address
    /// cannot be bound, so that the daemon fails its start-up checks instead of running unwatched.
    public static func start(_ listen: ListenAddress, health: DaemonHealth, registry: PrometheusCollectorRegistry,
                             logger: Logger) async throws -> DaemonEndpoints {
        let socketAddress: any SocketAddress
        do {
            switch listen.host {
            case .ipv4(let ip): socketAddress = try sockaddr_in.inet(ip4: ip, port: listen.port)
            case .ipv6(let ip): socketAddress = try sockaddr_in6.inet6(ip6: ip, port: listen.port)
            }
        } catch {
            throw ListenAddressError("cannot use \(listen) as an address: \(error)")
        }
        let server = HTTPServer(config: HTTPServer.Configuration(address: socketAddress, timeout: 15, logger: ServerLog(logger: logger)))
        await server.appendRoute("GET /healthz") { _ in
            let (ok, text) = health.liveness()
            return Self.text(ok ? .ok : .serviceUnavailable, text)
        }
        await server.appendRoute("GET /readyz") { _ in
            let (ok, text) = health.readiness()
            return Self.text(ok ? .ok : .serviceUnavailable, text)
        }
        await server.appendRoute("GET /metrics") { _ in
            HTTPResponse(statusCode: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                         body: Data(registry.emitToBuffer()))
        }

        // The first of: listening, or the server's end (an address in use ends it at once).
        let (events, event) = AsyncStream<Result<Void, any Error>>.makeStream()
        let task = Task {
            do {
                try await server.run()
                event.yield(.failure(ListenAddressError("the HTTP server stopped")))
            } catch {
                event.yield(.failure(error))
            }
        }
        let watcher = Task {
            do { try await server.waitUntilListening(timeout: 30); event.yield(.success(())) } catch { event.yield(.failure(error)) }
        }
        var first: Result<Void, any Error> = .failure(ListenAddressError("the HTTP server did not start"))
        for await outcome in events { first = outcome; break }
        watcher.cancel()
        if case .failure(let error) = first {
            await server.stop()
            task.cancel()
            throw ListenAddressError("cannot listen on \(listen): \(Self.describe(error))")
        }
        let bound: String
        switch await server.listeningAddress {
        case .ip4(let ip, let port)?: bound = "\(ip):\(port)"
        case .ip6(let ip, let port)?: bound = "[\(ip)]:\(port)"
        default: bound = listen.description
        }
        logger.info("serving /healthz, /readyz and /metrics", metadata: ["snap.listen": "\(bound)"])
        return DaemonEndpoints(address: bound, server: server, task: task)
    }

    /// Stops listening (after the daemon has stopped: a last scrape may see it drain).
    public func stop() async {
        await server.stop(timeout: 1)
        task.cancel()
    }

    private static func text(_ status: HTTPStatusCode, _ text: String) -> HTTPResponse {
        HTTPResponse(statusCode: status, headers: [.contentType: "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    private static func describe(_ error: any Error) -> String {
        if let socket = error as? SocketError, case .failed(_, let errno, let message) = socket {
            return "\(message) (errno \(errno))"
        }
        return "\(error)"
    }

    /// FlyingFox's own messages, at debug level but for its errors (a request it could not read).
    private struct ServerLog: FlyingSocks.Logging {
        let logger: Logger
        func logDebug(_ debug: @autoclosure () -> String) {}
        func logInfo(_ info: @autoclosure () -> String) {}
        func logWarning(_ warning: @autoclosure () -> String) { logger.debug("http: \(warning())") }
        func logError(_ error: @autoclosure () -> String) { logger.debug("http: \(error())") }
        func logCritical(_ critical: @autoclosure () -> String) { logger.debug("http: \(critical())") }
    }
}
