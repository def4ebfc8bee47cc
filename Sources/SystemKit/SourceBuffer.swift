import Foundation

/// Encoded input bytes at a stable address. libvips neither copies a buffer it
/// loads from nor reads it until pixels are needed, so every image derived from
/// one holds a reference to its `SourceBuffer` until the image itself goes away.
public final class SourceBuffer: @unchecked Sendable {  // @unchecked: a raw pointer, to bytes written only in init and read-only after
    /// `package`: for VipsKit, the other C-interop module (nothing above the C layer calls it).
    package let base: UnsafeMutableRawPointer
    /// Size in bytes.
    public let count: Int

    /// Copies `bytes` into memory owned by this buffer.
    public init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        count = bytes.count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        let target = UnsafeMutableRawBufferPointer(start: base, count: count)
        _ = target.initializeMemory(as: UInt8.self, from: bytes)
    }

    /// Allocates `count` bytes and lets `fill` write them (e.g. straight from a file).
    public init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        self.count = count
        base = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 16)
        do {
            try fill(UnsafeMutableRawBufferPointer(start: base, count: count))
        } catch {
            base.deallocate()
            throw error
        }
    }

    /// Lower-case hex SHA-256 of the bytes.
    public var sha256Hex: String { withBytes { SHA256.hex($0) } }

    /// MD5 of the bytes (to check a read against what a bucket notification announced).
    public var md5: [UInt8] { withBytes { MD5.digest($0) } }

    /// Bytes `range` (clamped to the buffer), copied.
    public func bytes(_ range: Range<Int>) -> [UInt8] {
        let clamped = range.clamped(to: 0..<count)
        return withBytes { Array($0[clamped]) }
    }

    /// Reads the bytes with a closure; the pointer is valid only inside it.
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    deinit { base.deallocate() }
}
