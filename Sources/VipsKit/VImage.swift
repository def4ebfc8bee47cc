internal import CVipsShim
internal import CKernelShim
import Foundation
import SystemKit

/// Colour interpretation of an image, as far as SnapThumb cares.
public enum Interpretation: Sendable, Equatable {
    case srgb, rgb16, bw, grey16, cmyk, other(Int)
}

/// Band formats SnapThumb meets.
public enum BandFormat: Sendable, Equatable {
    case uchar, ushort, float, other
}

/// How `VImage.thumbnail` picks the square out of a non-square image.
public enum CropMode: String, Sendable, CaseIterable, Codable {
    /// The centre of the image.
    case centre
    /// The most "interesting" region by libvips' attention measure (skin, edges, saturation).
    case attention

    var vipsValue: Int32 {
        switch self {
        case .centre: return Int32(SNAP_INTERESTING_CENTRE)
        case .attention: return Int32(SNAP_INTERESTING_ATTENTION)
        }
    }
}

/// JPEG chroma subsampling.
public enum Subsample: Sendable {
    /// libvips' default: 4:2:0 below quality 90.
    case auto
    case on
    case off

    var vipsValue: Int32 {
        switch self {
        case .auto: return Int32(SNAP_SUBSAMPLE_AUTO)
        case .on: return Int32(SNAP_SUBSAMPLE_ON)
        case .off: return Int32(SNAP_SUBSAMPLE_OFF)
        }
    }
}

/// One libvips image. It owns exactly one reference and drops it in `deinit`;
/// every operation returns a new image and leaves `self` unchanged.
public final class VImage: @unchecked Sendable {  // @unchecked: a VipsImage pointer; immutable once built, libvips lets threads read one, only kill() writes
    private let pointer: OpaquePointer
    /// Keeps the encoded bytes alive while libvips may still read them.
    private let source: SourceBuffer?

    private init(_ pointer: OpaquePointer, source: SourceBuffer?) {
        self.pointer = pointer
        self.source = source
    }

    deinit { snap_unref(pointer) }

    // MARK: Loading

    /// The loader libvips would choose for these bytes (`jpegload_buffer`, …), or nil.
    /// Blocked loaders are reported too: the caller decides what to accept.
    public static func loaderName(for source: SourceBuffer) -> String? {
        guard (try? Vips.start()) != nil else { return nil }
        let name = source.withBytes { snap_find_loader($0.baseAddress, $0.count) }
        Vips.clearError()
        return name.map { String(cString: $0) }
    }

    /// Opens `source` lazily: only the header is read until pixels are needed.
    /// - Parameter options: a libvips option string for the loader, e.g.
    ///   `"access=sequential,shrink=8,fail_on=warning"`.
    public static func load(_ source: SourceBuffer, options: String) throws -> VImage {
        try Vips.start()
        var out: OpaquePointer?
        let status = source.withBytes { snap_load($0.baseAddress, $0.count, options, &out) }
        guard status == 0, let out else { throw Vips.takeError("load") }
        return VImage(out, source: source)
    }

    /// Builds an 8-bit sRGB image from packed RGB bytes (copied).
    public static func fromRGB(_ rgb: [UInt8], width: Int, height: Int) throws -> VImage {
        precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
        return try rgb.withUnsafeBufferPointer { try fromMemory($0.baseAddress!, width: width, height: height, bands: 3, cmyk: false) }
    }

    /// An 8-bit image from packed pixels (copied): sRGB, B_W (one band) or CMYK.
    static func fromMemory(_ pixels: UnsafePointer<UInt8>, width: Int, height: Int, bands: Int, cmyk: Bool) throws -> VImage {
        try Vips.start()
        var out: OpaquePointer?
        let status = snap_from_memory(pixels, Int32(width), Int32(height), Int32(bands), cmyk ? 1 : 0, &out)
        guard status == 0, let out else { throw Vips.takeError("from_memory") }
        return VImage(out, source: nil)
    }

    // MARK: Header

    public var width: Int { Int(snap_image_width(pointer)) }
    public var height: Int { Int(snap_image_height(pointer)) }
    public var bands: Int { Int(snap_image_bands(pointer)) }
    public var hasAlpha: Bool { snap_image_has_alpha(pointer) != 0 }
    /// The band format.
    public var format: BandFormat {
        switch Int(snap_image_format(pointer)) {
        case SNAP_FORMAT_UCHAR: return .uchar
        case SNAP_FORMAT_USHORT: return .ushort
        case SNAP_FORMAT_FLOAT: return .float
        default: return .other
        }
    }
    /// True for 8-bit unsigned bands.
    public var isUChar: Bool { format == .uchar }

    public var interpretation: Interpretation {
        let raw = Int(snap_image_interpretation(pointer))
        switch raw {
        case SNAP_INTERPRETATION_sRGB, SNAP_INTERPRETATION_RGB: return .srgb
        case SNAP_INTERPRETATION_RGB16: return .rgb16
        case SNAP_INTERPRETATION_B_W: return .bw
        case SNAP_INTERPRETATION_GREY16: return .grey16
        case SNAP_INTERPRETATION_CMYK: return .cmyk
        default: return .other(raw)
        }
    }

    /// A copy of a blob field (`icc-profile-data`, `exif-data`, …), or nil.
    public func blob(_ name: String) -> [UInt8]? {
        var data: UnsafeRawPointer?
        var length = 0
        guard snap_get_blob(pointer, name, &data, &length) == 0, let data else { return nil }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }

    /// An integer field (`n-pages`, `orientation`, …), or nil.
    public func int(_ name: String) -> Int? {
        var value: Int32 = 0
        guard snap_get_int(pointer, name, &value) == 0 else { return nil }
        return Int(value)
    }

    // MARK: Operations

    private func op(_ name: String, _ body: (OpaquePointer, inout OpaquePointer?) -> Int32) throws -> VImage {
        var out: OpaquePointer?
        guard body(pointer, &out) == 0, let out else { throw Vips.takeError(name) }
        return VImage(out, source: source)
    }

    /// Decodes every pixel now, into memory. Decode errors surface here.
    public func materialized() throws -> VImage { try op("decode") { snap_copy_memory($0, &$1) } }
    public func withProfile(_ profile: [UInt8]) throws -> VImage {
        try op("set_profile") { image, out in
            profile.withUnsafeBytes { snap_with_profile(image, $0.baseAddress, $0.count, &out) }
        }
    }
    /// Rotates clockwise by 0, 90, 180 or 270 degrees.
    public func rotated(_ degrees: Int) throws -> VImage { try op("rot") { snap_rot($0, &$1, Int32(degrees)) } }
    public func flippedHorizontally() throws -> VImage { try op("flip") { snap_flip_horizontal($0, &$1) } }
    /// Lanczos3 resize by `scale`.
    public func resized(_ scale: Double) throws -> VImage { try op("resize") { snap_resize($0, &$1, scale) } }
    /// Box-filter shrink (each output pixel is the mean of its block).
    public func shrunk(_ h: Double, _ v: Double) throws -> VImage { try op("shrink") { snap_shrink($0, &$1, h, v) } }
    /// Exactly `width`×`height`: scale to fill, then crop.
    public func thumbnail(width: Int, height: Int, crop: CropMode) throws -> VImage {
        try op("thumbnail") { snap_thumbnail_image($0, &$1, Int32(width), Int32(height), crop.vipsValue) }
    }
    public func extractArea(left: Int, top: Int, width: Int, height: Int) throws -> VImage {
        try op("extract_area") { snap_extract_area($0, &$1, Int32(left), Int32(top), Int32(width), Int32(height)) }
    }
    /// ICC transform to 8-bit sRGB, relative colorimetric. `embedded` uses the
    /// image's own profile; `inputProfile` (`"cmyk"`, `"srgb"`, a path) is the fallback.
    public func iccToSRGB(inputProfile: String?, embedded: Bool) throws -> VImage {
        try op("icc_transform") { snap_icc_to_srgb($0, &$1, inputProfile, embedded ? 1 : 0) }
    }
    public func colourspaceSRGB() throws -> VImage { try op("colourspace") { snap_colourspace_srgb($0, &$1) } }
    public func castUChar() throws -> VImage { try cast(to: .uchar) }
    /// Converts the band format, clipping (no rescaling).
    public func cast(to format: BandFormat) throws -> VImage {
        let raw: Int
        switch format {
        case .uchar: raw = SNAP_FORMAT_UCHAR
        case .ushort: raw = SNAP_FORMAT_USHORT
        case .float, .other: raw = SNAP_FORMAT_FLOAT
        }
        return try op("cast") { snap_cast($0, &$1, Int32(raw)) }
    }
    /// `self * a + b`, per pixel (the result is float).
    public func linear(_ a: Double, _ b: Double) throws -> VImage { try op("linear") { snap_linear1($0, &$1, a, b) } }
    /// The bands of `self` followed by those of `other`.
    public func joined(with other: VImage) throws -> VImage {
        try op("bandjoin") { snap_bandjoin2($0, other.pointer, &$1) }
    }
    public func flattened(red: Double, green: Double, blue: Double) throws -> VImage {
        try op("flatten") { snap_flatten($0, &$1, red, green, blue) }
    }
    public func premultiplied() throws -> VImage { try op("premultiply") { snap_premultiply($0, &$1) } }
    public func unpremultiplied() throws -> VImage { try op("unpremultiply") { snap_unpremultiply($0, &$1) } }
    public func extractBands(_ first: Int, count: Int) throws -> VImage {
        try op("extract_band") { snap_extract_bands($0, &$1, Int32(first), Int32(count)) }
    }
    public func withOpaqueAlpha() throws -> VImage { try op("bandjoin") { snap_bandjoin_alpha255($0, &$1) } }

    // MARK: Output

    /// A stripped JPEG: baseline, or progressive when `progressive`; with restart
    /// markers every `restartInterval` MCUs when it is above 0.
    public func jpeg(quality: Int, optimizeCoding: Bool = true, subsample: Subsample = .auto, progressive: Bool = false,
                     restartInterval: Int = 0) throws -> [UInt8] {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard snap_jpegsave(pointer, &buffer, &length, Int32(quality), optimizeCoding ? 1 : 0, subsample.vipsValue, progressive ? 1 : 0,
                            Int32(restartInterval)) == 0,
              let buffer
        else { throw Vips.takeError("jpegsave") }
        defer { snap_g_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// The libvips image, for a wrapper in this module (the pointer must not escape `body`).
    func withPointer<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T { try body(pointer) }

    /// The pixels, packed row by row, band by band.
    public func pixels() throws -> [UInt8] {
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard snap_write_memory(pointer, &buffer, &length) == 0, let buffer else { throw Vips.takeError("write_to_memory") }
        defer { snap_free(buffer) }
        return Array(UnsafeRawBufferPointer(start: buffer, count: length))
    }

    /// Asks libvips to stop computing this image (from any thread); the
    /// computation then fails with an error.
    public func kill() { snap_kill(pointer) }
}
