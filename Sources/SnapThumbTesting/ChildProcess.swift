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

    /// Runs a program to its end with its standard output and error in one pipe: its exit
    /// status (the signal's number if one ended it) and that text.
    /// - Parameters:
    ///   - environment: its whole environment, or nil for this process's.
    ///   - directory: its working directory, or nil for this process's.
    ///   - input: written to its standard input, which is then closed (nil: `stdin` as given).
    public static func combined(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                                directory: String? = nil, stdin: SpawnedProcess.Stream = .inherit,
                                input: Data? = nil) throws -> (status: Int32, output: String) {
        let pipe = try SpawnedProcess.pipe()
        let process = try SpawnedProcess(executable, arguments, environment: environment, directory: directory,
                                         stdin: input == nil ? stdin : .pipe,
                                         stdout: .descriptor(pipe.write.fileDescriptor), stderr: .descriptor(pipe.write.fileDescriptor))
        try pipe.write.close()
        if let input, let writer = process.input {
            try writer.write(contentsOf: input)
            try writer.close()
        }
        let output = pipe.read.readDataToEndOfFile()
        return (process.wait().code, String(decoding: output, as: UTF8.self))
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
