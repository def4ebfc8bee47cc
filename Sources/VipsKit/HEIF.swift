import SystemKit
internal import CVipsShim
import Foundation

/// libvips' heifsave, for the optional modern square (AVIF or HEIC) of packed RGB pixels.
public enum HEIF {
    /// The two codecs a HEIF container can carry here.
    public enum Codec: String, Sendable, Codable, CaseIterable {
        /// AV1 in HEIF: AVIF (libheif's aom encoder).
        case avif
        /// HEVC in HEIF: HEIC (libheif's x265 encoder).
        case heic

        /// The manifest's media type.
        public var mediaType: String { self == .avif ? "image/avif" : "image/heic" }
    }

    /// A stripped 8-bit 4:4:4 image of packed 8-bit sRGB `rgb`, through libvips' heifsave.
    /// - Parameters:
    ///   - quality: libheif's lossy quality, 1–100.
    ///   - effort: libvips' CPU effort, 0–9 (libaom speed 9 − effort; x265 ignores it).
    public static func encode(rgb: [UInt8], width: Int, height: Int, codec: Codec, quality: Int, effort: Int) throws -> [UInt8] {
        let image = try VImage.fromRGB(rgb, width: width, height: height)
        return try image.heif(codec: codec, quality: quality, effort: effort)
    }

    /// The size of the embedded thumbnail of the HEIF file `source` (header only) when it
    /// can stand in for the primary image of `primarySize`: at least `minShortSide` on its
    /// short side and the primary's aspect ratio within 1 % (a thumbnail stored unrotated
    /// beside a rotated primary fails this). Nil when there is none (libvips then gives the
    /// primary image itself), it is too small or of another shape, or it cannot be read.
    public static func usableThumbnail(_ source: SourceBuffer, primarySize: (width: Int, height: Int),
                                       minShortSide: Int) -> (width: Int, height: Int)? {
        guard let thumbnail = try? VImage.load(source, options: "access=sequential,thumbnail=true") else { return nil }
        let (width, height) = (thumbnail.width, thumbnail.height)
        guard width > 0, height > 0, width != primarySize.width || height != primarySize.height,
              min(width, height) >= minShortSide else { return nil }
        let primaryAspect = Double(primarySize.width) / Double(primarySize.height)
        return abs(Double(width) / Double(height) - primaryAspect) <= 0.01 * primaryAspect ? (width, height) : nil
    }

    /// The threads libheif gives libaom: one per online CPU, at most 64
    /// (`std::thread::hardware_concurrency`; libvips 8.14's heifsave cannot set them). libaom
    /// makes the same bytes with any number above one, other bytes with one.
    public static var aomThreads: Int { min(max(sysconf(Int32(_SC_NPROCESSORS_ONLN)), 1), 64) }

    /// libheif's version, e.g. `1.15.1` (libvips is started to ask it).
    public static var libheifVersion: String? {
        guard (try? Vips.start()) != nil, let raw = snap_heif_version() else { return nil }
        return String(cString: raw)
    }
}

extension VImage {
    /// See `HEIF.encode`.
    public func heif(codec: HEIF.Codec, quality: Int, effort: Int) throws -> [UInt8] {
        try withPointer { pointer in
            var buffer: UnsafeMutableRawPointer?
            var length = 0
            guard snap_heifsave(pointer, &buffer, &length, codec == .avif ? 1 : 0, Int32(quality), Int32(effort)) == 0, let buffer
            else { throw Vips.takeError("heifsave") }
            defer { snap_g_free(buffer) }
            return Array(UnsafeRawBufferPointer(start: buffer, count: length))
        }
    }
}
