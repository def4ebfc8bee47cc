import Foundation
import SystemKit
import Synchronization

/// A task executor that is one thread of its own, named: a daemon's runner, receive loop and
/// tickers do blocking work (a `ProcessPool` run, a long poll, a retried HTTP call, file
/// I/O) on it, so that nothing of theirs ever blocks a thread of the cooperative pool, and
/// none of them waits for that pool either (a test process, or a busy daemon, may keep it full).
///
/// A task started with this executor as its preference (`group.addTask(executorPreference:)`)
/// runs its synchronous code here, and resumes here after every suspension (`Task.sleep`).
/// ``shutdown()`` ends the thread once the jobs enqueued so far have run.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private let jobs = Monitor((queue: [UnownedJob](), closed: false))
    public let name: String
    /// The threads of the executors running now, by pthread id, with their names.
    private static let running = Mutex<[pthread_t: String]>([:])

    public init(name: String) {
        self.name = name
        let thread = Thread { [self] in
            Self.running.withLock { $0[pthread_self()] = name }
            defer { _ = Self.running.withLock { $0.removeValue(forKey: pthread_self()) } }
            while true {
                let next: UnownedJob? = jobs.withLock { locked in
                    while locked.state.queue.isEmpty && !locked.state.closed { locked.wait() }
                    return locked.state.queue.isEmpty ? nil : locked.state.queue.removeFirst()
                }
                guard let next else { return }
                next.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = jobs.withLock { locked in
            guard !locked.state.closed else { return false }
            locked.state.queue.append(job)
            locked.broadcast()
            return true
        }
        // After shutdown (a straggler): it still runs, on a thread of Dispatch's.
        if !accepted {
            let executor = asUnownedTaskExecutor()
            DispatchQueue.global().async { job.runSynchronously(on: executor) }
        }
    }

    /// The name of the executor whose thread the caller runs on; nil on any other thread (a
    /// cooperative one, say). (The OS thread names Foundation should set are not set on Linux.)
    public static var currentName: String? { running.withLock { $0[pthread_self()] } }

    /// Ends the thread after the jobs already enqueued.
    public func shutdown() {
        jobs.withLock { locked in
            locked.state.closed = true
            locked.broadcast()
        }
    }
}
