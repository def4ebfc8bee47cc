import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// A daemon's HTTP endpoints (`--listen`), the same for `watch` and `consume`:
///
/// - `GET /healthz`: 200 while the main loop turns, 503 once it has been stuck longer than the
///   watchdog interval (a liveness probe restarts the pod, as systemd's watchdog restarts the unit);
/// - `GET /readyz`: 200 once the start-up checks passed, 503 before and while draining;
/// - `GET /metrics`: the registry in Prometheus' text format, the very metrics the textfile holds.
///
/// Served by Hummingbird 2 on SwiftNIO (event loops of their own; nothing here blocks a
/// cooperative thread), its tasks on a thread of their own (`EndpointsExecutor`); anything else is 404. Why Hummingbird and not a smaller server:
/// docs/operations.md, "HTTP endpoints".
public final class DaemonEndpoints: Sendable {
    /// Where it listens, with the port the kernel chose for port 0.
    public let address: String
    private let task: Task<Void, Never>
    /// The server's service group: stopped by a graceful shutdown (the listener closed, requests
    /// in flight answered), not by cancellation, which made the server log an error at every stop.
    private let group: ServiceGroup

    private init(address: String, task: Task<Void, Never>, group: ServiceGroup) {
        self.address = address
        self.task = task
        self.group = group
    }

    /// Binds and starts serving; throws (with the address in the message) when the address
    /// cannot be bound, so that the daemon fails its start-up checks instead of running unwatched.
    public static func start(_ listen: ListenAddress, health: DaemonHealth, registry: PrometheusCollectorRegistry,
                             logger: Logger) async throws -> DaemonEndpoints {
        let router = Router()
        router.get("/healthz") { _, _ in
            let (ok, text) = health.liveness()
            return Self.text(ok ? .ok : .serviceUnavailable, text)
        }
        router.get("/readyz") { _, _ in
            let (ok, text) = health.readiness()
            return Self.text(ok ? .ok : .serviceUnavailable, text)
        }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        let host: String
        switch listen.host {
        case .ipv4(let ip): host = ip
        case .ipv6(let ip): host = ip
        }
        // The server's own lines (a request it could not parse) only at debug level: the
        // daemon's log stays the daemon's.
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        // The first of: listening (with the bound address), or the server's end (an address in use ends it at once).
        let (events, event) = AsyncStream<Result<String, any Error>>.makeStream()
        let app = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: Int(listen.port)), serverName: nil),
            onServerRunning: { channel in
                let bound = channel.localAddress.map { address -> String in
                    let ip = address.ipAddress ?? host
                    return (ip.contains(":") ? "[\(ip)]" : ip) + ":\(address.port ?? Int(listen.port))"
                } ?? listen.description
                event.yield(.success(bound))
            },
            logger: quiet)
        // The server's tasks (a connection's, a request's) prefer a thread of their own: a probe
        // is answered even when every cooperative thread is busy or blocked.
        let group = ServiceGroup(services: [app], logger: quiet)
        let task = Task(executorPreference: EndpointsExecutor.shared) {
            do {
                try await group.run()
                event.yield(.failure(ListenAddressError("the HTTP server stopped")))
            } catch {
                event.yield(.failure(error))
            }
        }
        var first: Result<String, any Error> = .failure(ListenAddressError("the HTTP server did not start"))
        for await outcome in events { first = outcome; break }
        switch first {
        case .success(let bound):
            logger.info("serving /healthz, /readyz and /metrics", metadata: ["snap.listen": "\(bound)"])
            return DaemonEndpoints(address: bound, task: task, group: group)
        case .failure(let error):
            task.cancel()
            throw ListenAddressError("cannot listen on \(listen): \(error)")
        }
    }

    /// Stops listening (after the daemon has stopped: a last scrape may see it drain).
    public func stop() async {
        await group.triggerGracefulShutdown()
        await task.value
    }

    private static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "text/plain; charset=utf-8"],
                 body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// One serial queue that runs the endpoints' tasks (they inherit the preference): the probes
/// do not wait for the cooperative pool, which a daemon or a test process may keep busy.
final class EndpointsExecutor: TaskExecutor, Sendable {
    static let shared = EndpointsExecutor()
    private let queue = DispatchQueue(label: "snapthumb-endpoints")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
