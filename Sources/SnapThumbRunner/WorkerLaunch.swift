import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a `ProcessPool` starts a worker. Either way the worker runs `WorkerLoop`
/// and speaks `WorkerProtocol` over a pair of pipes: the supervisor cannot tell
/// the difference, except that a thread has no pid to kill.
public enum WorkerLaunch: Sendable, CustomStringConvertible {
    /// A `snapthumb worker` process (`WorkerCommandLine` makes its arguments).
    case process(executable: String, arguments: [String])
    /// A worker loop on a thread of this process, given its input and output:
    /// no process start, and no isolation (a crash takes the run; a late job
    /// cannot be stopped, so a pool of threads has no per-job deadline).
    case thread(@Sendable (_ input: FileHandle, _ output: FileHandle) -> Void)

    public var description: String {
        switch self {
        case .process(let executable, _): return executable
        case .thread: return "a worker thread"
        }
    }

    /// A started worker: where its jobs go, where its answers come from.
    struct Started {
        let input: FileHandle
        let output: FileHandle
        /// The process, or nil for a thread.
        let pid: Int32?
        private let process: Process?
        private let ended: DispatchSemaphore?

        init(process: Process, input: FileHandle, output: FileHandle) {
            self.process = process
            self.input = input
            self.output = output
            pid = process.processIdentifier
            ended = nil
        }

        init(thread ended: DispatchSemaphore, input: FileHandle, output: FileHandle) {
            process = nil
            self.ended = ended
            self.input = input
            self.output = output
            pid = nil
        }

        /// Kills a process (SIGKILL); a thread cannot be killed and is left to end.
        func kill() {
            if let pid { _ = Glibc.kill(pid, SIGKILL) }
        }

        /// Waits until the worker has ended (a thread once its input closed and its commits are done).
        func wait() {
            if let process { process.waitUntilExit() }
            if let ended { ended.wait(); ended.signal() }
        }

        /// How it ended (after `wait`).
        var status: Ending {
            guard let process else { return Ending(exited: true, text: "thread ended") }
            let code = process.terminationStatus
            return process.terminationReason == .uncaughtSignal
                ? Ending(exited: false, text: "signal \(code)")
                : Ending(exited: true, text: "process exited with status \(code)")
        }
    }

    struct Ending: CustomStringConvertible {
        /// It ended on its own, rather than by a signal.
        let exited: Bool
        let text: String
        var description: String { text }
    }

    func start() throws -> Started {
        let input = Pipe(), output = Pipe()
        switch self {
        case .process(let executable, let arguments):
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            return Started(process: process, input: input.fileHandleForWriting, output: output.fileHandleForReading)
        case .thread(let serve):
            let ended = DispatchSemaphore(value: 0)
            let jobs = input.fileHandleForReading, answers = output.fileHandleForWriting
            let thread = Thread {
                serve(jobs, answers)
                try? answers.close()
                ended.signal()
            }
            thread.name = "snapthumb-worker"
            // libvips and the encoders recurse deeper than a secondary thread's default stack.
            thread.stackSize = 8 << 20
            thread.start()
            return Started(thread: ended, input: input.fileHandleForWriting, output: output.fileHandleForReading)
        }
    }
}
