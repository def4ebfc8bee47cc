import Foundation
import Synchronization

/// The blobs a run's store holds, as its workers learn them: the parent's
/// listing, then what each worker reports having stored. Each worker is told,
/// with its next job, what it has not been told yet, so that a blob is PUT once
/// per run rather than once per worker (a worker otherwise starts knowing nothing).
final class BlobLedger: Sendable {
    /// Every name in the order learnt, and the same as a set.
    private let state = Mutex((names: [String](), seen: Set<String>()))

    init(_ initial: [String]) { add(initial) }

    func add(_ new: [String]) {
        state.withLock { state in
            for name in new where state.seen.insert(name).inserted { state.names.append(name) }
        }
    }

    /// The names added since `cursor`, and the cursor to ask with next time.
    func since(_ cursor: Int) -> ([String], Int) {
        state.withLock { state in
            (cursor < state.names.count ? Array(state.names[cursor...]) : [], state.names.count)
        }
    }
}
