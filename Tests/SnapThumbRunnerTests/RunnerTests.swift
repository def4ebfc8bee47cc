@testable import SnapThumbStore
@testable import SystemKit
import Foundation
import Testing
import SnapThumbVerify
import SnapThumbCore
@_spi(Testing) import SnapThumbRunner
@_spi(Testing) import SnapThumbTesting

/// A source that gives out jobs as a test adds them and ends when told, as the
/// watch daemon's claims do.
final class StreamSource: JobSource, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [FileWalker.Entry] = []
    private var ended = false

    func add(_ entry: FileWalker.Entry) { condition.lock(); jobs.append(entry); condition.broadcast(); condition.unlock() }
    func end() { condition.lock(); ended = true; condition.broadcast(); condition.unlock() }
    /// Jobs never taken.
    var left: Int { condition.lock(); defer { condition.unlock() }; return jobs.count }

    func next(waitingUpTo timeout: Double, id: JobID) -> JobSourceItem {
        condition.lock()
        defer { condition.unlock() }
        let until = Date(timeIntervalSinceNow: timeout)
        while jobs.isEmpty && !ended {
            if !condition.wait(until: until) { break }
        }
        if !jobs.isEmpty { return .job(jobs.removeFirst()) }
        return ended ? .ended : .notYet
    }

    var remaining: Int? { nil }
}

/// What a run reported, by key.
final class Outcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: [JobOutcome]] = [:]
    private let onEach: @Sendable (JobResult) -> Void

    init(onEach: @escaping @Sendable (JobResult) -> Void = { _ in }) { self.onEach = onEach }

    func record(_ result: JobResult) {
        lock.lock()
        byKey[result.entry.relativePath, default: []].append(result.outcome)
        lock.unlock()
        onEach(result)
    }

    /// Each key's outcomes, spelled `processed`, `skipped`, `failed:<code>`, `crashed:<code>`, `timedOut:<code>`, `abandoned`.
    var spelled: [String: [String]] {
        lock.lock()
        defer { lock.unlock() }
        return byKey.mapValues { $0.map(Self.spell) }
    }

    static func spell(_ outcome: JobOutcome) -> String {
        switch outcome {
        case .processed: "processed"
        case .skipped: "skipped"
        case .failed(let e): "failed:\(e.code.rawValue)"
        case .crashed(let e): "crashed:\(e.code.rawValue)"
        case .timedOut(let e): "timedOut:\(e.code.rawValue)"
        case .abandoned: "abandoned"
        }
    }
}

/// Calls `body` once when a key ending with `suffix` has been handed to a worker.
struct OnDispatch: RunFaults {
    let suffix: String
    let then: any RunFaults
    let body: @Sendable () -> Void
    func dispatched(key: String, toWorker workerPID: Int32?) {
        then.dispatched(key: key, toWorker: workerPID)
        if key.hasSuffix(suffix) { body() }
    }
    func began(key: String, inWorker workerPID: Int32?) { then.began(key: key, inWorker: workerPID) }
}

@Suite("The process runner (backfill now, watch next)")
struct RunnerTests {
    /// `count` copies of a small PNG, plus extra named files, in a fresh directory.
    static func inputs(_ count: Int, extra: [String: String] = [:]) throws -> (dir: String, entries: [String: FileWalker.Entry]) {
        let dir = Fixtures.tempDirectory("snapthumb-runner-in")
        var entries: [String: FileWalker.Entry] = [:]
        func add(_ sample: String, as name: String) throws {
            let path = "\(dir)/\(name)"
            try FileManager.default.copyItem(atPath: Fixtures.sample(sample), toPath: path)
            entries[name] = FileWalker.Entry(relativePath: name, path: path, size: try Fixtures.bytes(path).count)
        }
        for i in 0..<count { try add("snaps/tiny.png", as: "\(i).png") }
        for (name, sample) in extra { try add(sample, as: name) }
        return (dir, entries)
    }

    /// `runner-test-worker` (Tests/RunnerTestWorker).
    static var workerProgram: String { Fixtures.builtProduct("runner-test-worker") }

    static func pool(store: String, jobs: Int, window: Int, deadline: Double? = nil, loneCrashRetries: Int = 1, faults: any RunFaults = NoFaults()) -> ProcessPool {
        ProcessPool(launch: .process(executable: workerProgram, arguments: ["--store", store]), jobs: jobs, window: window,
                    deadline: deadline, loneCrashRetries: loneCrashRetries, faults: faults)
    }

    @Test("jobs from a source that blocks and then ends all go through, and the run ends with the source")
    func streamingSource() throws {
        let (input, entries) = try Self.inputs(8)
        let store = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let source = StreamSource()
        let outcomes = Outcomes()
        let pool = Self.pool(store: store, jobs: 2, window: 1)
        let feeder = Thread {
            for (_, entry) in entries.sorted(by: { $0.key < $1.key }) {
                source.add(entry)
                Thread.sleep(forTimeInterval: 0.03)
            }
            source.end()
        }
        feeder.start()
        try pool.run(source, finish: outcomes.record)
        #expect(outcomes.spelled == entries.mapValues { _ in ["processed"] })
        let report = try StoreVerifier.verify(root: store)
        #expect(report.isClean && report.manifests == 8, "\(report)")
    }

    @Test("a job past its deadline ends as timeout; the other jobs its worker held are dealt again, not suspected")
    func deadline() throws {
        // 0-stall.png comes first, so that it is the first job of the first worker:
        // the worker is stopped (as if wedged) as it begins it.
        let (input, entries) = try Self.inputs(10, extra: ["0-stall.png": "snaps/tiny.png"])
        let store = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let counts = CountDispatches(then: StopWorker(onKeysEndingWith: "stall.png"))
        let outcomes = Outcomes()
        let files = entries.values.sorted { $0.relativePath < $1.relativePath }
        try Self.pool(store: store, jobs: 1, window: 8, deadline: 3, faults: counts).run(FileList(files), finish: outcomes.record)
        var expected = entries.mapValues { _ in ["processed"] }
        expected["0-stall.png"] = ["timedOut:timeout"]
        #expect(outcomes.spelled == expected)
        // Held alongside the late job, the next files were sent again, each with company
        // (a suspect would travel alone): none was dispatched more than twice.
        #expect(counts.count("0-stall.png") == 1)
        #expect(counts.count("0.png") == 2)
        #expect(files.allSatisfy { counts.count($0.relativePath) <= 2 })
        #expect(try StoreVerifier.verify(root: store).manifests == 10)
    }

    @Test("a job that kills its worker while alone: watch's pool reports it at once, backfill's after one more try")
    func loneCrash() throws {
        for retries in [0, 1] {
            let (input, entries) = try Self.inputs(3, extra: ["0-killer.png": "snaps/tiny.png"])
            let store = Fixtures.tempDirectory("snapthumb-runner-store")
            defer { Fixtures.remove(input); Fixtures.remove(store) }
            let counts = CountDispatches(then: KillWorker(onKeysEndingWith: "killer.png"))
            let outcomes = Outcomes()
            let files = entries.values.sorted { $0.relativePath < $1.relativePath }
            try Self.pool(store: store, jobs: 1, window: 1, loneCrashRetries: retries, faults: counts).run(FileList(files), finish: outcomes.record)
            var expected = entries.mapValues { _ in ["processed"] }
            expected["0-killer.png"] = ["crashed:poison"]
            #expect(outcomes.spelled == expected, "loneCrashRetries \(retries)")
            #expect(counts.count("0-killer.png") == retries + 1)
        }
    }

    @Test("streaming: a job never waits behind another in one worker while a second worker has none")
    func streamingJobsGoToIdleWorkers() throws {
        let (input, entries) = try Self.inputs(2)
        let store = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        // Both ready before the workers start: the first supervisor to ask could take both (window 2).
        let source = StreamSource()
        for (_, entry) in entries.sorted(by: { $0.key < $1.key }) { source.add(entry) }
        let dispatches = RecordDispatches()
        let outcomes = Outcomes(onEach: { _ in if dispatches.count == 2 { source.end() } })
        try Self.pool(store: store, jobs: 2, window: 2, faults: dispatches).run(source, finish: outcomes.record)
        #expect(outcomes.spelled == entries.mapValues { _ in ["processed"] })
        #expect(Set(dispatches.workers.values).count == 2, "\(dispatches.workers)")
    }

    @Test("a worker that exits on its own (it cannot open its store) is no evidence: its jobs fail as io, not poison")
    func workerThatCannotStart() throws {
        let (input, entries) = try Self.inputs(3)
        let parent = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(parent) }
        // A file where the store's directory must be.
        let store = "\(parent)/store"
        _ = FileManager.default.createFile(atPath: store, contents: Data("x".utf8))
        let outcomes = Outcomes()
        let files = entries.values.sorted { $0.relativePath < $1.relativePath }
        try Self.pool(store: store, jobs: 1, window: 8).run(FileList(files), finish: outcomes.record)
        #expect(outcomes.spelled == entries.mapValues { _ in ["failed:io"] })
    }

    @Test("stop: nothing new is taken, jobs in flight finish")
    func gracefulStop() throws {
        let (input, entries) = try Self.inputs(6)
        let store = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let source = StreamSource()
        for (_, entry) in entries.sorted(by: { $0.key < $1.key }) { source.add(entry) }
        let box = PoolBox()
        // Stopped as soon as the first job is handed to the worker.
        let faults = OnDispatch(suffix: "0.png", then: NoFaults()) { box.pool?.stop() }
        let outcomes = Outcomes()
        let pool = Self.pool(store: store, jobs: 1, window: 2, faults: faults)
        box.pool = pool
        try pool.run(source, finish: outcomes.record)
        // That job finished and was published; the rest stayed in the source.
        #expect(outcomes.spelled == ["0.png": ["processed"]])
        #expect(source.left == 5)
        #expect(try StoreVerifier.verify(root: store).manifests == 1)
    }

    @Test("stop with a drain deadline: a wedged worker is killed and its jobs handed back as abandoned")
    func drainDeadline() throws {
        let (input, entries) = try Self.inputs(4, extra: ["0-stall.png": "snaps/tiny.png"])
        let store = Fixtures.tempDirectory("snapthumb-runner-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let source = StreamSource()
        for (_, entry) in entries.sorted(by: { $0.key < $1.key }) { source.add(entry) }
        let box = PoolBox()
        let faults = OnDispatch(suffix: "stall.png", then: StopWorker(onKeysEndingWith: "stall.png")) { box.pool?.stop(drainDeadline: 0.5) }
        let outcomes = Outcomes()
        let pool = Self.pool(store: store, jobs: 1, window: 2, faults: faults)
        box.pool = pool
        try pool.run(source, finish: outcomes.record)
        let spelled = outcomes.spelled
        #expect(spelled["0-stall.png"] == ["abandoned"])
        // Whatever else was taken is reported once; the rest stayed in the source.
        #expect(spelled.values.allSatisfy { $0.count == 1 })
        #expect(spelled.count + source.left == 5)
    }
}

final class PoolBox: @unchecked Sendable {
    var pool: ProcessPool?
}

/// Which worker process each key was sent to.
final class RecordDispatches: RunFaults, @unchecked Sendable {
    private let lock = NSLock()
    private var byKey: [String: Int32] = [:]
    func dispatched(key: String, toWorker workerPID: Int32?) { lock.lock(); byKey[key] = workerPID ?? 0; lock.unlock() }
    var workers: [String: Int32] { lock.lock(); defer { lock.unlock() }; return byKey }
    var count: Int { workers.count }
}
