import Foundation

/// The blobs a run's store holds, as its workers learn them: the parent's
/// listing, then what each worker reports having stored. Each worker is told,
/// with its next job, what it has not been told yet, so that a blob is PUT once
/// per run rather than once per worker (a worker otherwise starts knowing nothing).
final class BlobLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var names: [String] = []
    private var seen: Set<String> = []

    init(_ initial: [String]) { add(initial) }

    func add(_ new: [String]) {
        lock.lock()
        for name in new where seen.insert(name).inserted { names.append(name) }
        lock.unlock()
    }

    /// The names added since `cursor`, and the cursor to ask with next time.
    func since(_ cursor: Int) -> ([String], Int) {
        lock.lock()
        defer { lock.unlock() }
        return (cursor < names.count ? Array(names[cursor...]) : [], names.count)
    }
}
