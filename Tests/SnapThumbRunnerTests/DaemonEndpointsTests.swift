import Foundation
import HTTPKit
import Logging
import Prometheus
import Synchronization
import Testing
import SnapThumbRunner

/// The daemons' HTTP endpoints (`--listen`) through the runner's API: a real server on
/// loopback, fed by the same notifications systemd gets, on a clock the test moves.
@Suite("daemon endpoints")
struct DaemonEndpointsTests {
    /// A monotonic clock the test moves by hand.
    final class ManualClock: Sendable {
        private let value = Mutex(1000.0)
        func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
        var now: @Sendable () -> Double { { [self] in self.value.withLock { $0 } } }
    }

    /// A request from another thread (HTTPKit's async call), never blocking the cooperative pool the server runs on.
    static func get(_ address: String, _ path: String, method: String = "GET") async throws -> (status: Int, body: String, type: String?) {
        let response = try await HTTPTransport(timeout: 30).send(HTTPRequest(method: method, url: URL(string: "http://\(address)\(path)")!))
        return (response.status, String(decoding: response.body, as: UTF8.self), response.header("content-type"))
    }

    static func start(_ health: DaemonHealth, registry: PrometheusCollectorRegistry = DaemonMetrics.registry()) async throws -> DaemonEndpoints {
        let listen = try ListenAddress.parse("127.0.0.1:0").get()
        return try await DaemonEndpoints.start(listen, health: health, registry: registry, logger: Logger(label: "test"))
    }

    @Test("/readyz: 503 while starting, 200 after READY=1, 503 after STOPPING=1; /healthz: 200 while WATCHDOG=1 comes within the interval, 503 past it")
    func probesFollowTheNotifications() async throws {
        let clock = ManualClock()
        let health = DaemonHealth(watchdogInterval: 60, now: clock.now)
        let endpoints = try await Self.start(health)
        defer { Task { await endpoints.stop() } }
        let notifier = ServiceNotifier(environment: [:], health: health)
        // No systemd: the service still checks its loop every half interval, for the probe.
        #expect(notifier.watchdogInterval == 30)

        var ready = try await Self.get(endpoints.address, "/readyz")
        #expect(ready.status == 503 && ready.body.hasPrefix("starting"), "\(ready)")
        #expect(try await Self.get(endpoints.address, "/healthz").status == 200, "start-up is not a stuck loop")

        notifier.send("READY=1\nSTATUS=watching /up", logger: Logger(label: "test"))
        ready = try await Self.get(endpoints.address, "/readyz")
        #expect(ready.status == 200 && ready.body == "ready\n" && ready.type == "text/plain; charset=utf-8", "\(ready)")

        clock.advance(59)
        #expect(try await Self.get(endpoints.address, "/healthz").status == 200)
        clock.advance(2)
        let stuck = try await Self.get(endpoints.address, "/healthz")
        #expect(stuck.status == 503 && stuck.body.contains("has not turned for 61 s"), "\(stuck)")
        notifier.send("WATCHDOG=1", logger: Logger(label: "test"))
        #expect(try await Self.get(endpoints.address, "/healthz").status == 200)

        notifier.send("STOPPING=1\nSTATUS=draining", logger: Logger(label: "test"))
        let draining = try await Self.get(endpoints.address, "/readyz")
        #expect(draining.status == 503 && draining.body.hasPrefix("draining"), "\(draining)")
        #expect(try await Self.get(endpoints.address, "/healthz").status == 200, "a draining daemon is alive")
        // READY=1 again (it is never sent twice, but if it were) does not undo the drain.
        notifier.send("READY=1", logger: Logger(label: "test"))
        #expect(try await Self.get(endpoints.address, "/readyz").status == 503)
    }

    @Test("/metrics is the registry's text, as the textfile is; other paths and methods are not served")
    func metrics() async throws {
        let registry = DaemonMetrics.registry()
        let counter = registry.makeCounter(descriptor: MetricNameDescriptor(namespace: "snapthumb", subsystem: "test", metricName: "things", unitName: "total", helpText: "Things."))
        counter.increment(by: Int64(3))
        let endpoints = try await Self.start(DaemonHealth(watchdogInterval: 60), registry: registry)
        defer { Task { await endpoints.stop() } }
        let response = try await Self.get(endpoints.address, "/metrics")
        #expect(response.status == 200)
        #expect(response.type == "text/plain; version=0.0.4; charset=utf-8")
        #expect(response.body == String(decoding: registry.emitToBuffer(), as: UTF8.self))
        #expect(response.body.contains("snapthumb_test_things_total 3"), "\(response.body)")
        #expect(response.body.contains("snapthumb_build_info{version="), "\(response.body)")
        #expect(try await Self.get(endpoints.address, "/").status == 404)
        #expect(try await Self.get(endpoints.address, "/metrics/x").status == 404)
        #expect(try await Self.get(endpoints.address, "/readyz", method: "POST").status == 404)
    }

    @Test("an address in use fails at start with the address and the reason")
    func addressInUse() async throws {
        let first = try await Self.start(DaemonHealth(watchdogInterval: 60))
        defer { Task { await first.stop() } }
        let taken = try ListenAddress.parse(first.address).get()
        do {
            let second = try await DaemonEndpoints.start(taken, health: DaemonHealth(watchdogInterval: 60), registry: DaemonMetrics.registry(),
                                                         logger: Logger(label: "test"))
            await second.stop()
            Issue.record("a second server bound \(first.address)")
        } catch let error as ListenAddressError {
            #expect(error.description.hasPrefix("cannot listen on \(first.address): "), "\(error)")
            #expect(error.description.contains("in use"), "\(error)")
        }
    }

    @Test("systemd's watchdog, when it watches this process, sets both the ping period and the interval")
    func systemdInterval() {
        let env = ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "20000000"]
        #expect(ServiceNotifier.systemdWatchdog(environment: env, pid: 7) == 20)
        #expect(ServiceNotifier.systemdWatchdog(environment: env.merging(["WATCHDOG_PID": "8"]) { $1 }, pid: 7) == nil)
        #expect(ServiceNotifier(environment: env, pid: 7, health: DaemonHealth(watchdogInterval: 20)).watchdogInterval == 10)
        #expect(ServiceNotifier(environment: [:], pid: 7).watchdogInterval == nil, "no systemd, no endpoints: no watchdog ticks")
    }

    @Test("--listen values: IPv4, [IPv6], localhost, port 0; everything else explained")
    func listenAddresses() throws {
        #expect(try ListenAddress.parse("127.0.0.1:9090").get() == ListenAddress(host: .ipv4("127.0.0.1"), port: 9090))
        #expect(try ListenAddress.parse("0.0.0.0:0").get() == ListenAddress(host: .ipv4("0.0.0.0"), port: 0))
        #expect(try ListenAddress.parse("[::1]:9090").get() == ListenAddress(host: .ipv6("::1"), port: 9090))
        #expect(try ListenAddress.parse("localhost:80").get().description == "127.0.0.1:80")
        for bad in ["9090", ":9090", "example.com:9090", "127.0.0.1:70000", "127.0.0.1:x", "256.1.1.1:80", "[nope]:80", "::1:80", ""] {
            switch ListenAddress.parse(bad) {
            case .success(let address): Issue.record("'\(bad)' was taken as \(address)")
            case .failure(let error): #expect(error.description.contains("'\(bad)'"), "\(error)")
            }
        }
    }
}
