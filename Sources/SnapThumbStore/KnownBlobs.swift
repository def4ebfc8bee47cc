import Foundation
import SnapThumbCore

/// The blobs a process knows a store holds (listed, written by it, or told by
/// its parent), so that each is written once: a bucket store asks nothing before
/// a PUT, so without this every upload that shares a blob would PUT it again.
///
/// Thread-safe. `claim` also covers the same blob being uploaded by two threads
/// at once: the second waits for the first and writes nothing.
public final class KnownBlobs: @unchecked Sendable {
    private let condition = NSCondition()
    private var known: Set<String>
    /// Blobs a thread is writing now.
    private var writing: Set<String> = []

    public init(_ names: some Sequence<String> = []) {
        known = Set(names)
    }

    public func contains(_ name: String) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return known.contains(name)
    }

    /// Learns blobs that are stored (a listing, another process's writes).
    public func insert(contentsOf names: some Sequence<String>) {
        condition.lock()
        known.formUnion(names)
        condition.unlock()
    }

    /// Every blob known, in no particular order.
    public var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return Array(known)
    }

    public var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return known.count
    }

    /// True when the caller must write `name` (then it calls `finished`); false
    /// when it is stored, waiting while another thread writes it.
    public func claim(_ name: String) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while writing.contains(name) { condition.wait() }
        if known.contains(name) { return false }
        writing.insert(name)
        return true
    }

    /// Ends a `claim`: `stored` says whether the write succeeded (if not, a
    /// waiting thread claims it in turn).
    public func finished(_ name: String, stored: Bool) {
        condition.lock()
        writing.remove(name)
        if stored { known.insert(name) }
        condition.broadcast()
        condition.unlock()
    }
}
