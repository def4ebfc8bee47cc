import SystemKit
internal import CCodecShim
import Foundation

/// zlib, for the PNG encoder.
public enum Zlib {
    public enum Strategy: Int32, Sendable, CaseIterable {
        case `default` = 0, filtered = 1, huffmanOnly = 2, rle = 3
    }

    public static func crc32<Bytes: ContiguousBytes>(_ bytes: Bytes, seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { UInt32(truncatingIfNeeded: snap_crc32(UInt(seed), $0.baseAddress, $0.count)) }
    }

    /// A complete zlib stream of `bytes`.
    public static func deflate(_ bytes: [UInt8], level: Int, strategy: Strategy = .default) throws -> [UInt8] {
        var capacity = Int(snap_deflate_bound(bytes.count)) + 64
        var out = [UInt8](repeating: 0, count: capacity)
        let status = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { snap_deflate(input.baseAddress, input.count, Int32(level), strategy.rawValue, $0.baseAddress, &capacity) }
        }
        guard status == 0 else { throw VipsError(operation: "deflate", message: "zlib failed") }
        out.removeSubrange(capacity...)
        return out
    }

    /// PNG rows of palette indices without filter bytes: `depth` bits each (1, 2, 4 or 8),
    /// most significant first, `(width × depth + 7) / 8` bytes a row, rows one after another.
    public static func packedRows(indices: [UInt8], width: Int, height: Int, depth: Int) -> [UInt8] {
        precondition([1, 2, 4, 8].contains(depth) && indices.count >= width * height, "indices of width × height, depth 1, 2, 4 or 8")
        let count = (width * depth + 7) / 8 * height
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            indices.withUnsafeBufferPointer { input in
                if count > 0 { snap_pack_indices(input.baseAddress, Int32(width), Int32(height), Int32(depth), buffer.baseAddress) }
            }
            initialized = count
        }
    }
}
