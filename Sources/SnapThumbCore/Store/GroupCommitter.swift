import Foundation

/// Batches commits from many workers: workers hand over finished uploads and go
/// on to the next image; one thread commits whatever has queued up with
/// `Store.commitBatch` (two filesystem syncs per batch), then reports each
/// upload as durable or failed. Memory is bounded: `submit` waits while
/// `maxPending` uploads are queued.
public final class GroupCommitter<Tag: Sendable>: @unchecked Sendable {
    public typealias Completion = @Sendable (Tag, ProcessedUpload, SnapError?) -> Void

    private let store: Store
    private let maxBatch: Int
    private let maxPending: Int
    private let completion: Completion
    private let condition = NSCondition()
    private var pending: [(Tag, ProcessedUpload)] = []
    private var closed = false
    private var running = true

    public init(store: Store, maxBatch: Int = 64, maxPending: Int = 128, completion: @escaping Completion) {
        self.store = store
        self.maxBatch = max(1, maxBatch)
        self.maxPending = max(1, maxPending)
        self.completion = completion
        let thread = Thread { [self] in loop() }
        thread.name = "snapthumb-commit"
        thread.start()
    }

    /// Queues an upload; `completion` runs once it is durable (or failed).
    public func submit(_ upload: ProcessedUpload, tag: Tag) {
        condition.lock()
        while pending.count >= maxPending && !closed { condition.wait() }
        pending.append((tag, upload))
        condition.broadcast()
        condition.unlock()
    }

    /// Commits what is queued and stops; returns when every completion has run.
    public func finish() {
        condition.lock()
        closed = true
        condition.broadcast()
        while running { condition.wait() }
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while pending.isEmpty && !closed { condition.wait() }
            if pending.isEmpty && closed {
                running = false
                condition.broadcast()
                condition.unlock()
                return
            }
            let batch = Array(pending.prefix(maxBatch))
            pending.removeFirst(batch.count)
            condition.broadcast()
            condition.unlock()

            let results = store.commitBatch(batch.map(\.1))
            for (item, result) in zip(batch, results) { completion(item.0, item.1, result) }
        }
    }
}
