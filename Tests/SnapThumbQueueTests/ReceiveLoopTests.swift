import Foundation
import Logging
import Prometheus
import Synchronization
import Testing
import SnapThumbTesting
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
// @testable: `QueueSource` is internal, see QueueSourceTests.swift.
@testable import SnapThumbQueue

/// A queue whose receives follow a script: each step is a batch of messages or an error; after
/// the script it long-polls until cancelled, as SQS and Pub/Sub do at shutdown.
final class ScriptedQueue: MessageQueue, Sendable {
    enum Step: Sendable { case messages([QueueMessage]), failure(SnapError) }
    private let script: Mutex<[Step]>
    let receives = Mutex(0)
    let recorded = RecordingQueue()
    var location: String { "scripted://test" }
    var leaseSeconds: Double { 30 }

    init(_ steps: [Step]) { script = Mutex(steps) }

    func receive(maximum: Int, wait: Double, cancellation: ReceiveCancellation) throws -> [QueueMessage] {
        receives.withLock { $0 += 1 }
        if let step = script.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
            switch step {
            case .messages(let messages): return Array(messages.prefix(maximum))
            case .failure(let error): throw error
            }
        }
        let cancelled = DispatchSemaphore(value: 0)
        cancellation.whileRegistered({ cancelled.signal() }) { cancelled.wait() }
        throw QueueCancelled()
    }
    func setLease(_ message: QueueMessage, seconds: Double) throws { try recorded.setLease(message, seconds: seconds) }
    func acknowledge(_ message: QueueMessage) throws { try recorded.acknowledge(message) }
}

@Suite("consume: the receive loop over a MessageQueue")
struct ReceiveLoopTests {
    @Test("messages received become jobs; a failed receive is logged and pauses receiving; stop cancels the long poll and the loop returns; what was not started is released")
    func receiveFailAndStop() throws {
        let queue = ScriptedQueue([
            .messages([QueueSourceTests.message("m1", QueueSourceTests.event(["in/a.jpg"])),
                       QueueSourceTests.message("m2", QueueSourceTests.event(["in/b.jpg", "out/c.jpg"]))]),
            .failure(SnapError(.store, "the queue is unreachable")),
        ])
        let log = CapturedLog()
        let source = QueueHostileTests.source(queue, deadLetters: nil, log: log)
        let loop = DispatchSemaphore(value: 0)
        let thread = Thread {
            source.receiveLoop()
            loop.signal()
        }
        thread.start()
        // The runner's view: each job under its own id, waiting for it as a supervisor does.
        let first = source.next(waitingUpTo: .infinity, id: JobID(1))
        let second = source.next(waitingUpTo: .infinity, id: JobID(2))
        guard case .job(let a) = first, case .job(let b) = second else { Issue.record("no jobs: \(first) \(second)"); return }
        #expect([a.relativePath, b.relativePath] == ["a.jpg", "b.jpg"])
        // The failed receive comes next: it is logged, with the pause it takes.
        while !log.lines.contains(where: { $0.contains("cannot receive from the queue; retrying") }) { Thread.sleep(forTimeInterval: 0.01) }
        let line = try #require(log.lines.first { $0.contains("cannot receive from the queue; retrying") })
        #expect(line.contains("snap.error=the queue is unreachable") && line.contains("snap.pause_s="))

        source.conclude(JobResult(entry: a, outcome: .processed([:]), milliseconds: 1, id: JobID(1)))
        source.stop(pollGrace: 0)
        loop.wait()
        source.conclude(JobResult(entry: b, outcome: .abandoned, milliseconds: 0, id: JobID(2)))
        source.finish()
        #expect(Set(queue.recorded.calls.map { "\($0)" }) == Set([RecordingQueue.Call.ack("m1"), .lease("m2", 0)].map { "\($0)" }),
                "m1 published and deleted; m2 released at once")
        #expect(source.next(waitingUpTo: 0, id: JobID(3)).isEnded)
    }

    @Test("the outcome of every job, classified once by the runner's JobVerdict, decides the message: delete, dead-letter, leave, release")
    func verdictsDecideTheMessage() {
        let cases: [(JobOutcome, [RecordingQueue.Call])] = [
            (.processed([:]), [.ack("m")]),
            (.skipped, [.ack("m")]),
            (.failed(SnapError(.superseded, "replaced")), [.ack("m")]),
            (.failed(SnapError(.io, "unreachable")), [.lease("m", 1)]),
            (.crashed(SnapError(.poison, "killed")), [.ack("m")]),
            (.abandoned, [.lease("m", 0)]),
        ]
        for (outcome, calls) in cases {
            let queue = RecordingQueue()
            let source = QueueSourceTests.source(queue, deadLetters: false)
            source.admit(QueueSourceTests.message("m", QueueSourceTests.event(["in/a.jpg"])))
            let jobs = QueueSourceTests.take(source)
            source.conclude(QueueSourceTests.result(jobs[0], outcome))
            source.waitForSettling()
            #expect(queue.calls == calls, "\(outcome)")
        }
    }
}
