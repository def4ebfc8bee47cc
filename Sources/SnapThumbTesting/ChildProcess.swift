import Foundation
import SystemKit
import Synchronization

/// Runs a program to its end and returns its exit status and output, for tests that run
/// the built `snapthumb`. Both pipes are drained at once (stderr on its own thread), so a
/// child that fills one of them while we wait on the other cannot hang the test.
public enum ChildProcess {
    public struct Result: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// - Parameters:
    ///   - environment: added to (and overriding) this process's environment.
    ///   - unset: names removed from the inherited environment first (say, credentials).
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                           unset: [String] = []) throws -> Result {
        var inherited = ProcessInfo.processInfo.environment
        for name in unset { inherited[name] = nil }
        // Not Foundation's Process: a child started by another test meanwhile could hold
        // this one's pipes and keep the read below waiting for it (see SpawnedProcess).
        let process = try SpawnedProcess(executable, arguments, environment: inherited.merging(environment) { $1 },
                                         stdout: .pipe, stderr: .pipe)
        let stderr = Drain(process.errors!)
        let stdout = process.output!.readDataToEndOfFile()
        let ending = process.wait()
        return Result(status: ending.code, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr.wait(), as: UTF8.self))
    }

    /// Reads one pipe to its end on a thread of its own.
    private final class Drain: Sendable {  // `data` is set before `done` signals, read after.
        private let data = Mutex(Data())
        private let done = DispatchSemaphore(value: 0)

        init(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                let read = handle.readDataToEndOfFile()
                data.withLock { $0 = read }
                done.signal()
            }
        }

        func wait() -> Data {
            done.wait()
            return data.withLock { $0 }
        }
    }
}
