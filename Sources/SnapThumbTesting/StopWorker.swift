#if canImport(Glibc)
import Glibc
#endif
import SnapThumbRunner

/// A fault plan: the worker process handed a file whose key ends with `suffix` is
/// stopped (SIGSTOP) and never continues, like an image that never finishes.
public struct StopWorker: RunFaults {
    public let suffix: String

    public init(onKeysEndingWith suffix: String) { self.suffix = suffix }

    public func dispatched(key: String, toWorker workerPID: Int32) {
        if key.hasSuffix(suffix) { kill(workerPID, SIGSTOP) }
    }
}
