import SystemKit
internal import CCodecShim
import Foundation

/// One RGBA colour.
public struct RGBA: Hashable, Sendable {
    public var r: UInt8, g: UInt8, b: UInt8, a: UInt8
    public init(r: UInt8, g: UInt8, b: UInt8, a: UInt8 = 255) {
        self.r = r; self.g = g; self.b = b; self.a = a
    }
}

/// libimagequant's palette search.
public enum ImageQuant {
    /// An adaptive palette of at most `maxColours` for packed RGBA pixels.
    /// - Parameter speed: 1 (slowest, best) to 10 (fastest).
    public static func palette(rgba: [UInt8], width: Int, height: Int, maxColours: Int, speed: Int) throws -> [RGBA] {
        precondition(rgba.count == width * height * 4, "RGBA buffer does not match its size")
        var raw = [UInt8](repeating: 0, count: 256 * 4)
        var count: Int32 = 0
        let status = rgba.withUnsafeBufferPointer { pixels in
            raw.withUnsafeMutableBufferPointer { palette in
                snap_quantize_palette(pixels.baseAddress, Int32(width), Int32(height), Int32(maxColours),
                                      Int32(speed), palette.baseAddress, &count)
            }
        }
        guard status == 0 else { throw VipsError(operation: "quantize", message: "libimagequant could not build a palette") }
        return (0..<Int(count)).map { i in RGBA(r: raw[i * 4], g: raw[i * 4 + 1], b: raw[i * 4 + 2], a: raw[i * 4 + 3]) }
    }
}
