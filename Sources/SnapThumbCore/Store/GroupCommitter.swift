import Foundation

/// Batches commits from many workers: a worker writes its upload's blobs
/// (`Store.stage`, on its own thread: creating files is CPU work, and it
/// belongs to the job that made them) and goes on to the next image; one thread
/// publishes whatever has queued up with `Store.publishBatch` (two filesystem
/// syncs per batch), then reports each upload as durable or failed. Memory is
/// bounded: `submit` waits while `maxPending` uploads are queued.
public final class GroupCommitter<Tag: Sendable>: @unchecked Sendable {
    public typealias Completion = @Sendable (Tag, ProcessedUpload, SnapError?) -> Void

    private let store: Store
    private let maxBatch: Int
    private let maxPending: Int
    private let maxDelay: Double
    private let completion: Completion
    private let condition = NSCondition()
    /// Queued uploads with their arrival time (uptime seconds).
    private var pending: [(tag: Tag, staged: Store.Staged, arrived: Double)] = []
    private var closed = false
    private var running = true

    /// - Parameter maxDelay: how long the first upload of a batch waits for others
    ///   (seconds). A syncfs costs 0.3–1.7 ms of kernel CPU here whatever it
    ///   flushes: committing as soon as anything was queued synced about twice per
    ///   snap. 15 ms gathers four or more snaps per sync (a worker's window of 32
    ///   files keeps it busy meanwhile); at 50 ms the workers idled more at the
    ///   end of each batch than the syncs saved.
    public init(store: Store, maxBatch: Int = 64, maxPending: Int = 128, maxDelay: Double = 0.015, completion: @escaping Completion) {
        self.store = store
        self.maxBatch = max(1, maxBatch)
        self.maxPending = max(1, maxPending)
        self.maxDelay = max(0, maxDelay)
        self.completion = completion
        let thread = Thread { [self] in loop() }
        thread.name = "snapthumb-commit"
        thread.start()
    }

    /// Writes the upload's blobs and queues it; `completion` runs once it is
    /// durable, or at once (on this thread) when its blobs cannot be written.
    public func submit(_ upload: ProcessedUpload, tag: Tag) {
        let staged: Store.Staged
        do {
            staged = try store.stage(upload)
        } catch {
            completion(tag, upload, error as? SnapError ?? SnapError(.io, "\(error)"))
            return
        }
        condition.lock()
        while pending.count >= maxPending && !closed { condition.wait() }
        pending.append((tag, staged, Self.now()))
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

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private func loop() {
        while true {
            condition.lock()
            while pending.isEmpty && !closed { condition.wait() }
            // Gather a batch: until it is full, the first upload has waited
            // maxDelay, or no more are coming.
            while !closed, pending.count < maxBatch, let oldest = pending.first?.arrived, Self.now() - oldest < maxDelay {
                _ = condition.wait(until: Date(timeIntervalSinceNow: maxDelay - (Self.now() - oldest)))
            }
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

            let results = store.publishBatch(batch.map(\.staged))
            for (item, result) in zip(batch, results) { completion(item.tag, item.staged.upload, result) }
        }
    }
}
