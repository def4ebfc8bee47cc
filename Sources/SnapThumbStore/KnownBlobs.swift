import Foundation
import SystemKit
import SnapThumbCore

/// The blobs a process knows a store holds (listed, written by it, or told by
/// its parent), so that each is written once: a bucket store asks nothing before
/// a PUT, so without this every upload that shares a blob would PUT it again.
///
/// Thread-safe. `claim` also covers the same blob being uploaded by two threads
/// at once: the second waits for the first and writes nothing.
public final class KnownBlobs: Sendable {
    /// Blobs known to be stored, and blobs a thread is writing now.
    private let state: Monitor<(known: Set<String>, writing: Set<String>)>

    public init(_ names: some Sequence<String> = []) {
        state = Monitor((Set(names), []))
    }

    public func contains(_ name: String) -> Bool {
        state.withLock { $0.state.known.contains(name) }
    }

    /// Learns blobs that are stored (a listing, another process's writes).
    public func insert(contentsOf names: some Sequence<String>) {
        state.withLock { $0.state.known.formUnion(names) }
    }

    /// Every blob known, in no particular order.
    public var all: [String] { state.withLock { Array($0.state.known) } }

    public var count: Int { state.withLock { $0.state.known.count } }

    /// True when the caller must write `name` (then it calls `finished`); false
    /// when it is stored, waiting while another thread writes it.
    public func claim(_ name: String) -> Bool {
        state.withLock { locked in
            while locked.state.writing.contains(name) { locked.wait() }
            if locked.state.known.contains(name) { return false }
            locked.state.writing.insert(name)
            return true
        }
    }

    /// Ends a `claim`: `stored` says whether the write succeeded (if not, a
    /// waiting thread claims it in turn).
    public func finished(_ name: String, stored: Bool) {
        state.withLock { locked in
            locked.state.writing.remove(name)
            if stored { locked.state.known.insert(name) }
            locked.broadcast()
        }
    }
}
