#if canImport(Glibc)
import Glibc
#endif
import SnapThumbRunner

/// A fault plan for runs with worker processes: the worker that is handed a file
/// whose key ends with `suffix` is killed at once with SIGKILL, as the OOM killer
/// would. Every time, so such a file crashes its worker when alone as well.
public struct KillWorker: RunFaults {
    public let suffix: String

    public init(onKeysEndingWith suffix: String) { self.suffix = suffix }

    public func dispatched(key: String, toWorker workerPID: Int32) {
        if key.hasSuffix(suffix) { kill(workerPID, SIGKILL) }
    }
}
