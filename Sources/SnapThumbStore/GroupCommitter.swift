import Foundation
import SystemKit
import SnapThumbCore

/// Batches commits from many workers: a worker writes its upload's blobs
/// (`Store.stage`, on its own thread: creating files is CPU work, and it
/// belongs to the job that made them) and goes on to the next image; one thread
/// publishes whatever has queued up: a filesystem sync makes the batch's files
/// durable, its manifests are renamed into place, and the next sync, which is
/// also the next batch's first, makes the renames durable. Only then is each
/// upload reported, as durable or failed: one syncfs per batch rather than two
/// (each costs 0.3–1.7 ms of kernel CPU, which at `--jobs N` on N cores is taken
/// from the workers). Memory is bounded: `submit` waits while `maxPending`
/// uploads are queued.
/// How long a group commit gathers a batch by default, seconds (see `GroupCommitter.init`):
/// what a daemon uses, where an upload's publication waits for it.
public let defaultGroupCommitDelay = 0.015
/// The same for a batch run (backfill, bench), where nobody waits for one file's manifest:
/// about twenty snaps per sync at one job rather than three. The syncs fell from 2.8 % to
/// 1.1 % of a one-job backfill's CPU (docs/performance.md); a result is reported at most
/// this much later, and an interrupted run still ends at once (the worker flushes).
public let batchGroupCommitDelay = 0.12

public final class GroupCommitter<Tag: Sendable>: Sendable {
    public typealias Completion = @Sendable (Tag, ProcessedUpload, SnapError?) -> Void

    private let store: Store
    private let maxBatch: Int
    private let maxPending: Int
    private let maxDelay: Double
    private let completion: Completion

    private struct Queue {
        /// Queued uploads with their arrival time (uptime seconds).
        var pending: [(tag: Tag, staged: Store.Staged, arrived: Double)] = []
        var closed = false
        var running = true
        /// Commit what is queued without waiting for more (see `flush`).
        var hurry = false
    }
    private let queue = Monitor(Queue())

    /// - Parameter maxDelay: how long the first upload of a batch waits for others
    ///   (seconds). A syncfs costs 0.3–1.7 ms of kernel CPU here whatever it
    ///   flushes: committing as soon as anything was queued synced about twice per
    ///   snap. 15 ms gathers four or more snaps per sync; the worker goes on with
    ///   its next files meanwhile (it never waits for its own commits).
    public init(store: Store, maxBatch: Int = 64, maxPending: Int = 128, maxDelay: Double = defaultGroupCommitDelay, completion: @escaping Completion) {
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
        queue.withLock { locked in
            while locked.state.pending.count >= maxPending && !locked.state.closed { locked.wait() }
            locked.state.pending.append((tag, staged, Self.now()))
            locked.state.hurry = false
            // The committer needs waking only when this upload starts a batch (it may be
            // waiting for any upload at all) or fills one. Otherwise it is waiting for the
            // oldest upload's delay, which this one does not change, and wakes by itself:
            // a wake for every upload cost its thread a wake-up and a sleep per snap.
            let count = locked.state.pending.count
            if count == 1 || count >= maxBatch { locked.broadcast() }
        }
    }

    /// Commits what is queued, and confirms it, without waiting for more uploads
    /// to batch with: for a caller that has no more work at hand for now.
    /// The next `submit` goes back to batching.
    public func flush() {
        queue.withLock { locked in
            locked.state.hurry = true
            locked.broadcast()
        }
    }

    /// Commits what is queued and stops; returns when every completion has run.
    public func finish() {
        queue.withLock { locked in
            locked.state.closed = true
            locked.broadcast()
            while locked.state.running { locked.wait() }
        }
    }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private func loop() {
        /// Renamed into place, reported once the next sync has made that durable.
        var unconfirmed: [(tag: Tag, upload: ProcessedUpload, result: SnapError?)] = []
        /// When `unconfirmed` was renamed (uptime seconds).
        var renamedAt = 0.0
        while true {
            let batch: [(tag: Tag, staged: Store.Staged, arrived: Double)]? = queue.withLock { locked in
                while locked.state.pending.isEmpty && unconfirmed.isEmpty && !locked.state.closed { locked.wait() }
                // Gather a batch: until it is full, the oldest upload (or the last
                // renames, waiting for their sync) has waited maxDelay, or no more are coming.
                while !locked.state.closed, !locked.state.hurry, locked.state.pending.count < maxBatch {
                    let waited = Self.now() - (locked.state.pending.first?.arrived ?? renamedAt)
                    if waited >= maxDelay { break }
                    locked.wait(seconds: maxDelay - waited)
                }
                if locked.state.pending.isEmpty && unconfirmed.isEmpty && locked.state.closed {
                    locked.state.running = false
                    locked.broadcast()
                    return nil
                }
                let batch = Array(locked.state.pending.prefix(maxBatch))
                locked.state.pending.removeFirst(batch.count)
                locked.broadcast()
                return batch
            }
            guard let batch else { return }

            // This sync makes the batch's blobs and temp manifests durable, and the
            // previous batch's renames (which are reported only now).
            let step = store.syncAndPlace(batch.map(\.staged))
            for item in unconfirmed { completion(item.tag, item.upload, item.result ?? step.synced) }
            unconfirmed = zip(batch, step.placed).compactMap { item, result in
                if let failure = step.synced {
                    completion(item.tag, item.staged.upload, failure)
                    return nil
                }
                if case .failure(let error) = result { return (item.tag, item.staged.upload, error) }
                return (item.tag, item.staged.upload, nil)
            }
            renamedAt = Self.now()
        }
    }
}
