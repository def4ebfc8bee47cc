import Foundation
import SystemKit
import SnapThumbCore

/// What a bucket notification said about the object it announces: the exact version to
/// read and what its bytes must be. A worker reads that version (Cloud Storage's
/// `?generation=N`) and checks what it read; a file walk or a listing has none.
public struct SourceExpectation: Sendable, Equatable {
    /// The generation written (Cloud Storage): read exactly this one, not whatever is there now.
    public var generation: Int64?
    /// The object's size in bytes.
    public var size: Int64?
    /// The MD5 of its bytes (absent for composite objects).
    public var md5: [UInt8]?

    public init(generation: Int64? = nil, size: Int64? = nil, md5: [UInt8]? = nil) {
        self.generation = generation
        self.size = size
        self.md5 = md5
    }

    /// True when there is nothing to read by or check.
    public var isEmpty: Bool { generation == nil && size == nil && md5 == nil }

    /// Nil when `bytes` are what was announced (size and MD5, where given); otherwise
    /// what differs, for a message (sizes only: digests say nothing to a person).
    public func mismatch(count: Int, md5 digest: () -> [UInt8]) -> String? {
        if let size, Int64(count) != size { return "read \(count) bytes, the notification says \(size)" }
        if let md5, digest() != md5 { return "the \(count) bytes read do not have the MD5 the notification gives" }
        return nil
    }

    public func mismatch(in source: SourceBuffer) -> String? { mismatch(count: source.count) { source.md5 } }
    public func mismatch(in data: Data) -> String? { mismatch(count: data.count) { MD5.digest(data) } }
}
