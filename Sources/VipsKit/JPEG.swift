internal import CSnapShim
import Foundation

/// libjpeg, for encoding small thumbnails without a libvips pipeline per encode.
public enum JPEG {
    /// Chroma subsampling.
    public enum Chroma: String, Sendable, Codable, CaseIterable {
        /// Full-resolution chroma.
        case c444 = "444"
        /// Chroma halved in both directions.
        case c420 = "420"
    }

    /// A baseline JPEG of packed 8-bit RGB with no metadata markers at all.
    public static func encode(rgb: [UInt8], width: Int, height: Int, quality: Int, chroma: Chroma = .c444,
                              optimizeCoding: Bool = true) throws -> [UInt8] {
        precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
        var out: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = rgb.withUnsafeBufferPointer {
            snap_jpeg_encode_rgb($0.baseAddress, Int32(width), Int32(height), Int32(quality), optimizeCoding ? 1 : 0,
                                 chroma == .c420 ? 2 : 1, &out, &length)
        }
        guard status == 0, let out else { throw VipsError(operation: "jpeg_encode", message: "libjpeg could not encode \(width)×\(height)") }
        defer { snap_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: length))
    }
}
