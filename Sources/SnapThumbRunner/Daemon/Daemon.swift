import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import SnapThumbCore
import SystemKit

/// The one daemon skeleton (`watch`, `consume`): a job source fed to the process runner, with
/// the tickers, the watchdog, the drain and the signals around it. The daemons are a
/// ``DaemonPlan`` each (their job source, their configuration, what they log); this runs it.
///
///     the runner (ProcessPool) on a thread of its own, `finish` → the plan's `conclude`
///     the plan's blocking loops (consume's receive loop), a thread each
///     the plan's tickers, each a child task on a thread of its own
///     `started` (its log line), READY=1, then the watchdog (WATCHDOG=1 while healthy)
///     (the plan's hooks run on a thread of their own too: stopping a scanner may block)
///     … until graceful shutdown (SIGTERM/SIGINT through ServiceGroup, or cancellation)
///       or the runner failing (no worker process can be started) …
///     STOPPING=1, `draining` (stop taking work), the runner's drain (`drainTimeout`, then
///     the workers still busy are killed and their jobs abandoned), the loops' end,
///     `drained` (release what is still held), the tickers' end, `stopped`
///
/// On a runner failure both daemons drain and stop, and ``run(_:notifier:logger:)`` throws
/// (the command exits 1, and systemd or Kubernetes restarts it): holding uploads or messages
/// with no worker to run them would only delay them.
///
/// Built as swift-service-lifecycle recommends for a library: the wait is
/// `withGracefulShutdownHandler` (and cancellation), the children are a task group, and
/// everything that blocks runs on a ``ThreadExecutor`` of its own, never on a cooperative thread.
/// Every interval and timeout is measured on a monotonic clock.
public enum Daemon {
    /// Runs the plan until graceful shutdown (or the runner's failure) and its drain are over.
    public static func run(_ plan: DaemonPlan, notifier: ServiceNotifier, logger: Logger) async throws {
        let ending = Latch<Ending>()
        let runnerDone = Latch<Void>()
        let loopsDone = plan.loops.map { _ in Latch<Void>() }
        let runnerThread = ThreadExecutor(name: "snapthumb-\(plan.name)-runner")
        // The plan's hooks: stopping a scanner or a receive loop, handing back what is held, may block.
        let controlThread = ThreadExecutor(name: "snapthumb-\(plan.name)-control")
        let loopThreads = plan.loops.map { ThreadExecutor(name: $0.name) }
        let tickerThreads = plan.tickers.map { ThreadExecutor(name: $0.name) }
        let watchdogThread = notifier.watchdogInterval.map { _ in ThreadExecutor(name: plan.watchdogName) }
        let tickersStop = StopSignal()
        defer {
            for executor in [runnerThread, controlThread] + loopThreads + tickerThreads + (watchdogThread.map { [$0] } ?? []) { executor.shutdown() }
        }

        let why = await withDiscardingTaskGroup { group -> Ending in
            group.addTask(executorPreference: runnerThread) {
                do { try plan.pool.run(plan.source, finish: plan.conclude) } catch {
                    logger.critical("cannot run worker processes", metadata: ["snap.error": "\(describe(error))"])
                    ending.fire(.runnerFailed(describe(error)))
                }
                runnerDone.fire(())
            }
            for (loop, (thread, done)) in zip(plan.loops, zip(loopThreads, loopsDone)) {
                group.addTask(executorPreference: thread) {
                    loop.body()
                    done.fire(())
                }
            }
            // The tickers and the watchdog end once the drain is over.
            for (ticker, thread) in zip(plan.tickers, tickerThreads) {
                group.addTask(executorPreference: thread) { ticker.run(until: tickersStop) }
            }
            await withTaskExecutorPreference(controlThread) { plan.started() }
            notifier.send("READY=1\nSTATUS=\(plan.readyStatus)", logger: logger)
            if let interval = notifier.watchdogInterval, let watchdogThread, let check = plan.watchdog {
                let watchdog = DaemonTicker(name: plan.watchdogName, interval: interval) {
                    switch check() {
                    case .healthy: notifier.send("WATCHDOG=1", logger: logger)
                    case .stuck(let report): if let report { logger.error(report.message, metadata: report.metadata) }
                    }
                }
                group.addTask(executorPreference: watchdogThread) { watchdog.run(until: tickersStop) }
            }

            // Until SIGTERM/SIGINT (ServiceGroup's graceful shutdown), cancellation, or the runner's failure.
            let why = await withTaskCancellationHandler {
                await withGracefulShutdownHandler {
                    await ending.value
                } onGracefulShutdown: {
                    ending.fire(.shutdown)
                }
            } onCancel: {
                ending.fire(.shutdown)
            }
            notifier.send("STOPPING=1\nSTATUS=draining", logger: logger)
            await withTaskExecutorPreference(controlThread) { plan.draining() }
            plan.pool.stop(drainDeadline: plan.drainTimeout)
            await runnerDone.value
            for done in loopsDone { await done.value }
            // The tickers run on meanwhile (consume's leases of the messages still held).
            await withTaskExecutorPreference(controlThread) { plan.drained() }
            tickersStop.fire()
            return why
        }
        // Every child has ended: no tick runs any more.
        await withTaskExecutorPreference(controlThread) { plan.stopped() }
        if case .runnerFailed(let reason) = why { throw SnapError(.internal, "cannot run worker processes: \(reason)") }
    }

    enum Ending: Sendable {
        case shutdown
        case runnerFailed(String)
    }
}

/// One daemon: its job source, how its results are concluded, and what it does around the run.
public struct DaemonPlan: Sendable {
    /// `watch` or `consume`: the runner's thread is `snapthumb-<name>-runner`.
    public var name: String
    public var pool: ProcessPool
    public var source: any JobSource
    /// Every job's end, from the runner's supervisor threads (``JobResult/verdict`` classifies it).
    public var conclude: @Sendable (JobResult) -> Void
    /// On shutdown, how long jobs in flight may finish before their workers are killed.
    public var drainTimeout: Double
    /// Blocking loops beside the runner (each returns once `draining` has stopped it).
    public var loops: [DaemonLoop] = []
    public var tickers: [DaemonTicker] = []
    /// The watchdog's check, each half watchdog interval (only when systemd or `--listen` watches).
    public var watchdog: (@Sendable () -> WatchdogCheck)?
    public var watchdogName: String
    /// systemd's STATUS= text once ready.
    public var readyStatus: String
    // The four hooks run in this order, on the daemon's control thread (`snapthumb-<name>-control`).
    /// After the runner, the loops and the tickers started, before READY=1 (the start log line).
    public var started: @Sendable () -> Void = {}
    /// On shutdown, before the runner's drain: log, and stop taking work.
    public var draining: @Sendable () -> Void = {}
    /// After the runner and the loops returned, tickers still running: hand back what is held (may block).
    public var drained: @Sendable () -> Void = {}
    /// After the tickers stopped: the last metrics, the last log line.
    public var stopped: @Sendable () -> Void = {}

    public init(name: String, pool: ProcessPool, source: any JobSource, conclude: @escaping @Sendable (JobResult) -> Void,
                drainTimeout: Double, watchdogName: String, readyStatus: String) {
        self.name = name
        self.pool = pool
        self.source = source
        self.conclude = conclude
        self.drainTimeout = drainTimeout
        self.watchdogName = watchdogName
        self.readyStatus = readyStatus
    }
}

/// What the watchdog's check found.
public enum WatchdogCheck: Sendable {
    /// The main loop turns: WATCHDOG=1.
    case healthy
    /// Stuck: no WATCHDOG=1 (systemd restarts the unit, `/healthz` answers 503); the error
    /// line to log, if one is due.
    case stuck(report: (message: Logger.Message, metadata: Logger.Metadata)?)
}

/// A blocking loop on a thread of its own.
public struct DaemonLoop: Sendable {
    public let name: String
    public let body: @Sendable () -> Void
    public init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// Work done every `interval` seconds (monotonic), on a thread of its own, from the start until
/// the drain is over; the next interval starts when a tick ends.
public struct DaemonTicker: Sendable {
    public let name: String
    public let interval: Double
    public let tick: @Sendable () -> Void
    public init(name: String, interval: Double, tick: @escaping @Sendable () -> Void) {
        self.name = name
        self.interval = interval
        self.tick = tick
    }

    /// Ticks until `stop` fires (a tick under way finishes first; the stop wakes the wait at
    /// once). It blocks, so it runs on the ticker's own thread (a `ThreadExecutor`), where
    /// the wait is a condition variable's, on the monotonic clock.
    func run(until stop: StopSignal) {
        stop.monitor.withLock { locked in
            while !locked.state {
                if !locked.wait(seconds: interval), !locked.state {
                    locked.unlocked { tick() }
                }
            }
        }
    }
}

/// Set once to stop the tickers; wakes them at once.
final class StopSignal: Sendable {
    let monitor = Monitor(false)
    func fire() {
        monitor.withLock { locked in
            locked.state = true
            locked.broadcast()
        }
    }
}

/// A value set once, that tasks wait for.
final class Latch<Value: Sendable>: Sendable {
    private let state = Mutex<(value: Value?, waiters: [CheckedContinuation<Value, Never>])>((nil, []))

    /// Sets the value (only the first call counts) and wakes the waiters.
    func fire(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Value? in
                    if let value = state.value { return value }
                    state.waiters.append(continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        }
    }
}
