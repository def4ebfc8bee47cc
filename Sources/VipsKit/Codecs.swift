internal import CSnapShim
import Foundation

/// EXIF reading through libexif.
public enum Exif {
    /// The IFD0 orientation tag of an EXIF blob, or 0 when it is absent or the
    /// blob cannot be read. Never throws: bad EXIF must not fail an image.
    public static func orientation(_ blob: [UInt8]) -> Int {
        blob.withUnsafeBytes { Int(snap_exif_orientation($0.baseAddress, $0.count)) }
    }
}

/// SHA-256 (OpenSSL's libcrypto: it uses the CPU's SHA instructions, ten times GLib's speed).
public enum SHA256 {
    public static func digest<Bytes: ContiguousBytes>(_ bytes: Bytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { snap_sha256(input.baseAddress, input.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        return out
    }

    public static func hex<Bytes: ContiguousBytes>(_ bytes: Bytes) -> String {
        digest(bytes).map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}

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
}

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

/// Resampling small images without a libvips pipeline.
public enum Resample {
    /// The exact centre `side`×`side` square of packed 8-bit RGB, scaled to fill
    /// (Lanczos3): `VImage.thumbnail(… crop: .centre)` without its rounding of the
    /// crop to whole pixels, for a fraction of its cost on the ~270×360 images
    /// SnapThumb decodes snaps to.
    public static func squareCentre(rgb: [UInt8], width: Int, height: Int, side: Int) throws -> [UInt8] {
        precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
        var out = [UInt8](repeating: 0, count: side * side * 3)
        let status = rgb.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { snap_square_rgb(input.baseAddress, Int32(width), Int32(height), Int32(side), $0.baseAddress) }
        }
        guard status == 0 else { throw VipsError(operation: "square", message: "out of memory resampling \(width)×\(height)") }
        return out
    }

    /// Packed 8-bit RGB rotated clockwise by `rotate` degrees (0, 90, 180, 270),
    /// then mirrored left–right if `flip`: the same pixels as `rotated` then
    /// `flippedHorizontally` on a `VImage`, without a libvips pipeline.
    public static func oriented(rgb: [UInt8], width: Int, height: Int, rotate: Int, flip: Bool) -> (pixels: [UInt8], width: Int, height: Int) {
        precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
        precondition([0, 90, 180, 270].contains(rotate), "rotation is a multiple of 90 degrees")
        if rotate == 0 && !flip { return (rgb, width, height) }
        var out = [UInt8](repeating: 0, count: rgb.count)
        rgb.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { snap_orient_rgb(input.baseAddress, Int32(width), Int32(height), Int32(rotate), flip ? 1 : 0, $0.baseAddress) }
        }
        let swap = rotate == 90 || rotate == 270
        return (out, swap ? height : width, swap ? width : height)
    }
}

/// File-system calls Swift's Glibc module does not export.
public enum FileSystem {
    /// Flushes every dirty page and inode of the filesystem holding `path`.
    /// Returns 0, or an errno value.
    public static func syncfs(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return snap_syncfs(fd) == 0 ? 0 : errno
    }
}
