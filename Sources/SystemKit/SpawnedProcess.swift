internal import CSystemShim
#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A started program, for worker processes and the tests' servers and daemons: what
/// Foundation's `Process` does, without what makes it fragile in a program that starts
/// children from several threads and waits on them from others.
///
/// - `Process` closes in the child the descriptors it counted before the spawn; a pipe
///   another thread opens in between is inherited (a window of microseconds: not seen
///   in 6,000 children started four at a time here, but a worker that holds a sibling's
///   input keeps that sibling from ever seeing its end). Here every pipe is
///   close-on-exec and the child closes everything above its standard streams
///   (`closefrom`) after the fork, whenever it was opened.
/// - `Process` learns of an exit through a socket the child inherits, on one manager
///   thread shared by every `Process` of the program, and `waitUntilExit` polls a run
///   loop with no limit: anything else holding that socket, or that thread stuck, and
///   every wait in the program waits with it. Here a waiter blocks in `waitid` on its
///   own child.
/// - It is reaped once, by whoever notices its end first, and never signalled after:
///   a pid is not recycled under a `signal(_:)`.
public final class SpawnedProcess: Sendable {

    /// A standard stream of the child.
    public enum Stream {
        /// This process's own.
        case inherit
        /// /dev/null.
        case null
        /// A new pipe; this process's end is in `input`, `output` or `errors`.
        case pipe
        /// An open descriptor of this process (it stays open here).
        case descriptor(Int32)
    }

    /// How it ended: its exit status, or the signal that ended it.
    public struct Ending: Sendable, Equatable, CustomStringConvertible {
        public let code: Int32
        public let signaled: Bool
        public init(code: Int32, signaled: Bool) {
            self.code = code
            self.signaled = signaled
        }
        public var description: String { signaled ? "signal \(code)" : "process exited with status \(code)" }
    }

    public let processIdentifier: Int32
    /// This process's ends of the pipes asked for (write end of `stdin`, read ends of the others).
    public let input: FileHandle?
    public let output: FileHandle?
    public let errors: FileHandle?
    private let monitor = Monitor<Ending?>(nil)

    /// Starts `executable` (a path; no PATH search) with `arguments`.
    /// - Parameters:
    ///   - environment: the child's whole environment, or nil for this process's.
    ///   - directory: its working directory, or nil for this process's.
    ///   - ownProcessGroup: in a process group of its own (as `Process` does), so that a
    ///     terminal's ^C or a signal to this process's group is not also its.
    /// - Throws: `Errno` when it cannot be started (no such file, not executable, …).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
                stdin: Stream = .inherit, stdout: Stream = .inherit, stderr: Stream = .inherit,
                ownProcessGroup: Bool = true) throws {
        /// The child's ends of its pipes: closed here once it has them (when these are released).
        var childEnds: [FileHandle] = []
        /// The child's descriptor for one stream, and this process's end of a new pipe.
        func prepare(_ stream: Stream, childReads: Bool) throws -> (child: Int32, mine: FileHandle?) {
            switch stream {
            case .inherit: return (-1, nil)
            case .null: return (-2, nil)
            case .descriptor(let fd): return (fd, nil)
            case .pipe:
                let pipe = try Self.pipe()
                let (childEnd, myEnd) = childReads ? (pipe.read, pipe.write) : (pipe.write, pipe.read)
                childEnds.append(childEnd)
                return (childEnd.fileDescriptor, myEnd)
            }
        }
        defer { for end in childEnds { try? end.close() } }
        let i = try prepare(stdin, childReads: true)
        let o = try prepare(stdout, childReads: false)
        let e = try prepare(stderr, childReads: false)
        input = i.mine; output = o.mine; errors = e.mine

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: Int32 = 0
        let group: Int32 = ownProcessGroup ? 1 : 0
        func spawn(_ env: UnsafePointer<UnsafeMutablePointer<CChar>?>?, _ dir: UnsafePointer<CChar>?) -> Int32 {
            argv.withUnsafeBufferPointer { args in
                snap_spawn(executable, args.baseAddress, env, dir, i.child, o.child, e.child, group, &pid)
            }
        }
        func spawn(_ env: UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
            if let directory { return directory.withCString { spawn(env, $0) } }
            return spawn(env, nil)
        }
        let status = envp.map { envp in envp.withUnsafeBufferPointer { spawn($0.baseAddress) } } ?? spawn(nil)
        guard status == 0 else { throw Errno(status) }
        processIdentifier = pid
    }

    /// A pipe whose ends no child inherits (close-on-exec), for a worker thread's streams.
    public static func pipe() throws -> (read: FileHandle, write: FileHandle) {
        var fds: [Int32] = [-1, -1]
        guard snap_pipe(&fds) == 0 else { throw Errno(errno) }
        return (FileHandle(fileDescriptor: fds[0], closeOnDealloc: true), FileHandle(fileDescriptor: fds[1], closeOnDealloc: true))
    }

    /// Reaps it if it has ended (with the lock held); whether it has.
    private func reapIfEnded(_ ended: inout Ending?) -> Bool {
        if ended != nil { return true }
        switch snap_wait_exited(processIdentifier, 0) {
        case 1:
            var code: Int32 = 0, signaled: Int32 = 0
            // Not a child any more (reaped by someone else's waitpid(-1)): its status is lost.
            ended = snap_reap(processIdentifier, &code, &signaled) == 0
                ? Ending(code: code, signaled: signaled != 0) : Ending(code: -1, signaled: false)
            return true
        default:
            return false
        }
    }

    public var isRunning: Bool { monitor.withLock { !reapIfEnded(&$0.state) } }

    /// Waits for it to end (any number of threads may wait) and says how.
    @discardableResult
    public func wait() -> Ending {
        while true {
            if let ended = monitor.withLock({ locked -> Ending? in reapIfEnded(&locked.state) ? locked.state : nil }) {
                return ended
            }
            // Blocks until it has ended, leaving it to be reaped under the lock.
            _ = snap_wait_exited(processIdentifier, 1)
        }
    }

    /// `wait()`, for code written against `Process`.
    public func waitUntilExit() { wait() }

    /// SIGTERM (unless reaped), for code written against `Process`.
    public func terminate() { signal(SIGTERM) }

    /// The exit status, or the signal's number (after it ended).
    public var terminationStatus: Int32 { wait().code }
    public var terminationReason: Process.TerminationReason { wait().signaled ? .uncaughtSignal : .exit }

    /// Sends `signal` unless it has already been reaped (its pid may be another's by then).
    /// Returns whether it was sent.
    @discardableResult
    public func signal(_ signal: Int32) -> Bool {
        monitor.withLock { locked in
            guard locked.state == nil else { return false }
            return kill(processIdentifier, signal) == 0
        }
    }
}
