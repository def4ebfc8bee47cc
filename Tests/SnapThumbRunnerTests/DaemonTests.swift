import Foundation
import Logging
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import SnapThumbTesting
import SnapThumbCore
import SnapThumbStore
@_spi(Testing) import SnapThumbRunner

/// What a daemon plan saw happen, in order.
final class PlanEvents: Sendable {
    let events = Mutex<[String]>([])
    let ticks = Mutex(0)
    let tickThreads = Mutex<Set<String>>([])
    func add(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
    var tickCount: Int { ticks.withLock { $0 } }

    /// A plan over `pool` and `source` that records its hooks and ticks.
    func plan(pool: ProcessPool, source: any JobSource) -> DaemonPlan {
        var plan = DaemonPlan(name: "test", pool: pool, source: source, conclude: { _ in }, drainTimeout: 5,
                              watchdogName: "test-watchdog", readyStatus: "testing")
        plan.tickers = [DaemonTicker(name: "test-ticker", interval: 0.01) { [self] in
            ticks.withLock { $0 += 1 }
            tickThreads.withLock { _ = $0.insert(ThreadExecutor.currentName ?? "none") }
        }]
        plan.started = { [self] in add("started on \(ThreadExecutor.currentName ?? "none")") }
        plan.draining = { [self] in add("draining on \(ThreadExecutor.currentName ?? "none")") }
        plan.drained = { [self] in add("drained (ticks \(tickCount > 0 ? "ran" : "none")) on \(ThreadExecutor.currentName ?? "none")") }
        plan.stopped = { [self] in add("stopped on \(ThreadExecutor.currentName ?? "none")") }
        return plan
    }
}

/// A worker loop on a thread that only reads its input until it is closed (no job ever comes).
let idleWorker = WorkerLaunch.thread { input, _ in _ = input.readDataToEndOfFile() }

@Suite("The daemon skeleton (watch and consume)")
struct DaemonTests {
    let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    @Test("graceful shutdown: READY, the tickers on their own thread, then STOPPING, the drain and the hooks in order; no tick after the end")
    func gracefulShutdown() async throws {
        let events = PlanEvents()
        let source = StreamSource()
        let health = DaemonHealth(watchdogInterval: 0.02)
        let notifier = ServiceNotifier(environment: [:], health: health)
        var configured = events.plan(pool: ProcessPool(launch: idleWorker, jobs: 1), source: source)
        let checks = Mutex(0)
        configured.watchdog = {
            checks.withLock { $0 += 1 }
            return .healthy
        }
        let plan = configured, quiet = self.quiet
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Daemon.run(plan, notifier: notifier, logger: quiet) }
                while events.tickCount < 3 || checks.withLock({ $0 }) < 2 { try await Task.sleep(for: .milliseconds(5)) }
                #expect(health.phase == .ready)
                #expect(health.liveness().ok, "the watchdog's WATCHDOG=1 reached the health state")
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        // The hooks, which may block (stopping a scanner, handing back what is held), run on a thread of their own.
        #expect(events.all == ["started on snapthumb-test-control", "draining on snapthumb-test-control",
                               "drained (ticks ran) on snapthumb-test-control", "stopped on snapthumb-test-control"])
        #expect(health.phase == .draining)
        #expect(events.tickThreads.withLock { $0 } == ["test-ticker"], "ticks run on the ticker's own thread, never a cooperative one")
        let after = events.tickCount
        try await Task.sleep(for: .milliseconds(50))
        #expect(events.tickCount == after, "the tickers ended with the daemon")
    }

    @Test("the runner failing (no worker process can be started) ends the daemon as a shutdown would, then throws")
    func runnerFailure() async throws {
        let events = PlanEvents()
        let source = StreamSource()
        let pool = ProcessPool(launch: .process(executable: "/nonexistent/snapthumb-worker", arguments: []), jobs: 2)
        let error = await #expect(throws: SnapError.self) {
            try await Daemon.run(events.plan(pool: pool, source: source), notifier: .none, logger: quiet)
        }
        #expect(error?.code == .internal)
        #expect(error?.message.hasPrefix("cannot run worker processes: ") == true)
        #expect(events.all.first?.hasPrefix("started") == true)
        #expect(Array(events.all.dropFirst().map { String($0.prefix { $0 != " " }) }) == ["draining", "drained", "stopped"])
    }

    @Test("the watchdog: WATCHDOG=1 while the check is healthy; when stuck, no ping, and the report logged only when given")
    func watchdog() async throws {
        let events = PlanEvents()
        let health = DaemonHealth(watchdogInterval: 0.05)
        let notifier = ServiceNotifier(environment: [:], health: health)
        var configured = events.plan(pool: ProcessPool(launch: idleWorker, jobs: 1), source: StreamSource())
        let checks = Mutex(0)
        configured.watchdog = {
            let n = checks.withLock { $0 += 1; return $0 }
            return .stuck(report: n == 1 ? ("stuck for the test", ["snap.n": "\(n)"]) : nil)
        }
        let plan = configured
        let log = CapturedLog()
        try await testGracefulShutdown { trigger in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await Daemon.run(plan, notifier: notifier, logger: log.logger) }
                // Stuck from the first check on: the loop last "turned" at READY=1; wait until that is past the interval.
                while health.liveness().ok || checks.withLock({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(5)) }
                trigger.triggerGracefulShutdown()
                try await group.waitForAll()
            }
        }
        #expect(log.lines.filter { $0.hasPrefix("error") } == ["error stuck for the test snap.n=1"])
    }
}

@Suite("A job's end, classified once")
struct JobVerdictTests {
    @Test("every outcome of the runner has one verdict, with its error; the digests travel with a published job")
    func classification() {
        func spell(_ verdict: JobVerdict) -> String {
            switch verdict {
            case .published(_, let digest, let replaced): return "published \(digest ?? "-") \(replaced ?? "-")"
            case .repeated: return "repeat"
            case .superseded(let error): return "superseded \(error.code.rawValue)"
            case .transient(let error): return "transient \(error.code.rawValue)"
            case .refused(let error, let how): return "refused \(error.code.rawValue) \(how)"
            case .abandoned: return "abandoned"
            }
        }
        let cases: [(JobOutcome, String)] = [
            (.processed([:]), "published sha256:a sha256:b"),
            (.skipped, "repeat"),
            (.failed(SnapError(.superseded, "replaced")), "superseded superseded"),
            (.failed(SnapError(.io, "disk")), "transient io"),
            (.failed(SnapError(.store, "unreachable")), "transient store"),
            (.failed(SnapError(.corrupt, "broken")), "refused corrupt failed"),
            (.failed(SnapError(.internal, "cannot start")), "refused internal failed"),
            (.crashed(SnapError(.poison, "killed")), "refused poison crashed"),
            (.timedOut(SnapError(.timeout, "slow")), "refused timeout timedOut"),
            (.abandoned, "abandoned"),
        ]
        for (outcome, expected) in cases {
            let verdict = JobResult(entry: FileWalker.Entry(relativePath: "a.jpg", path: "/a.jpg", size: 1), outcome: outcome, milliseconds: 1,
                                    id: JobID(1), sourceDigest: "sha256:a", replacedDigest: "sha256:b").verdict
            #expect(spell(verdict) == expected)
            #expect((verdict.error == nil) == ["published", "repeat", "abandoned"].contains { expected.hasPrefix($0) })
        }
    }
}
