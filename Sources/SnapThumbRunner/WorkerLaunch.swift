import Foundation
import SystemKit
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
        let process: SpawnedProcess?
        private let ended: DispatchSemaphore?

        init(process: SpawnedProcess) {
            self.process = process
            input = process.input!
            output = process.output!
            ended = nil
        }

        init(thread ended: DispatchSemaphore, input: FileHandle, output: FileHandle) {
            process = nil
            self.ended = ended
            self.input = input
            self.output = output
        }

        var pid: Int32? { process?.processIdentifier }

        /// Kills a process (SIGKILL); a thread cannot be killed and is left to end.
        func kill() { process?.signal(SIGKILL) }

        /// Waits until the worker has ended (a thread once its input closed and its commits are done).
        func wait() {
            process?.wait()
            if let ended { ended.wait(); ended.signal() }
        }

        /// How it ended (after `wait`).
        var status: Ending {
            guard let process else { return Ending(exited: true, text: "thread ended") }
            let ending = process.wait()
            return Ending(exited: !ending.signaled, text: ending.description)
        }
    }

    struct Ending: CustomStringConvertible {
        /// It ended on its own, rather than by a signal.
        let exited: Bool
        let text: String
        var description: String { text }
    }

    func start() throws -> Started {
        switch self {
        case .process(let executable, let arguments):
            // Not Foundation's Process: a worker must hold no sibling's pipe (see SpawnedProcess).
            let process = try SpawnedProcess(executable, arguments, stdin: .pipe, stdout: .pipe)
            return Started(process: process)
        case .thread(let serve):
            // Close-on-exec, like a process's: a child started meanwhile must not hold them.
            let input = try SpawnedProcess.pipe(), output = try SpawnedProcess.pipe()
            let ended = DispatchSemaphore(value: 0)
            let jobs = input.read, answers = output.write
            let thread = Thread {
                serve(jobs, answers)
                try? answers.close()
                ended.signal()
            }
            thread.name = "snapthumb-worker"
            // libvips and the encoders recurse deeper than a secondary thread's default stack.
            thread.stackSize = 8 << 20
            thread.start()
            return Started(thread: ended, input: input.write, output: output.read)
        }
    }
}
