/// Points in a run where a test can make things go wrong on purpose, the way
/// swift-service-lifecycle's test kit injects its shutdown trigger: production
/// runs use ``NoFaults``, and a test passes its own plan (SnapThumbTesting has some).
/// Nothing here reads the environment or looks at file names.
@_spi(Testing) public protocol RunFaults: Sendable {
    /// A job for `key` was just written to worker process `workerPID` (nil: a worker
    /// thread, which has no pid; never 0, which `kill` would take for the whole group).
    func dispatched(key: String, toWorker workerPID: Int32?)
    /// Worker process `workerPID` has just finished everything sent before the job for
    /// `key`: it works on that job now (the per-job deadline starts here).
    func began(key: String, inWorker workerPID: Int32?)
    /// The watch daemon read a batch of inotify events: true turns it into a queue overflow.
    func inotifyBatchOverflows() -> Bool
}

@_spi(Testing) extension RunFaults {
    public func dispatched(key: String, toWorker workerPID: Int32?) {}
    public func began(key: String, inWorker workerPID: Int32?) {}
    public func inotifyBatchOverflows() -> Bool { false }
}

/// No faults: what every real run uses.
@_spi(Testing) public struct NoFaults: RunFaults {
    public init() {}
}
