#if canImport(Glibc)
import Glibc
#endif
@_spi(Testing) import SnapThumbRunner

/// A fault plan: the worker process that begins a file whose key ends with `suffix` is
/// stopped (SIGSTOP) and never continues, like an image that never finishes. It stops
/// when the worker reaches that file, not when the file is sent, so the jobs queued
/// before it in the same worker finish, as they would before a real hang.
@_spi(Testing) public struct StopWorker: RunFaults {
    public let suffix: String

    public init(onKeysEndingWith suffix: String) { self.suffix = suffix }

    public func began(key: String, inWorker workerPID: Int32?) {
        if key.hasSuffix(suffix), let workerPID { kill(workerPID, SIGSTOP) }
    }
}
