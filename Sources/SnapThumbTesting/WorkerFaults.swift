import Foundation
#if canImport(Glibc)
import Glibc
#endif
@_spi(Testing) import SnapThumbRunner
import Synchronization

/// A fault plan for runs with worker processes: the worker that is handed a file
/// whose key ends with `suffix` is killed at once with SIGKILL, as the OOM killer
/// would. Every time, so such a file crashes its worker when alone as well.
@_spi(Testing) public struct KillWorker: RunFaults {
    public let suffix: String

    public init(onKeysEndingWith suffix: String) { self.suffix = suffix }

    public func dispatched(key: String, toWorker workerPID: Int32?) {
        if key.hasSuffix(suffix), let workerPID { kill(workerPID, SIGKILL) }
    }
}

/// Counts how often each key was handed to a worker, and passes every dispatch
/// on to another plan (faults are combined this way).
@_spi(Testing) public final class CountDispatches: RunFaults, Sendable {
    private let counts = Mutex<[String: Int]>([:])
    private let then: any RunFaults

    public init(then: any RunFaults = NoFaults()) { self.then = then }

    public func dispatched(key: String, toWorker workerPID: Int32?) {
        counts.withLock { $0[key, default: 0] += 1 }
        then.dispatched(key: key, toWorker: workerPID)
    }

    public func began(key: String, inWorker workerPID: Int32?) { then.began(key: key, inWorker: workerPID) }
    public func inotifyBatchOverflows() -> Bool { then.inotifyBatchOverflows() }

    /// Times `key` was handed to a worker so far.
    public func count(_ key: String) -> Int {
        counts.withLock { $0[key] ?? 0 }
    }
}

/// A fault plan for the watch daemon: every batch of inotify events is lost to a
/// queue overflow, so that only rescans can find uploads.
@_spi(Testing) public struct OverflowInotify: RunFaults {
    public init() {}
    public func dispatched(key: String, toWorker workerPID: Int32?) {}
    public func inotifyBatchOverflows() -> Bool { true }
}
