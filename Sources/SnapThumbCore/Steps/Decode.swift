import Foundation
import VipsKit
import SystemKit

/// An accepted input format, from the loader libvips picks for the bytes.
enum InputFormat: String, Sendable {
    case jpeg, png, webp, heif, gif

    /// The allowlist. Any other loader (TIFF, SVG, PDF, ImageMagick, …) means `unsupported`,
    /// and libvips has those blocked as well (`Vips.start`).
    init?(loader: String) {
        // libvips names loaders by GObject class (VipsForeignLoadJpegBuffer).
        switch loader {
        case "VipsForeignLoadJpegBuffer": self = .jpeg
        case "VipsForeignLoadPngBuffer": self = .png
        case "VipsForeignLoadWebpBuffer": self = .webp
        case "VipsForeignLoadHeifBuffer": self = .heif
        case "VipsForeignLoadNsgifBuffer": self = .gif
        default: return nil
        }
    }

    static let acceptedList = "JPEG, PNG, WebP, HEIC/HEIF, AVIF, GIF"

    /// libheif applies HEIF's own transform boxes (irot, imir) while decoding; the
    /// EXIF orientation of a HEIF file must not be applied a second time.
    var appliesOwnOrientation: Bool { self == .heif }
}

/// Facts about the upload, for the manifest's `source` object.
public struct SourceInfo: Sendable, Equatable, Codable {
    /// `sha256:<hex>` of the input bytes.
    public var digest: String
    public var bytes: Int
    public var mediaType: String
    /// Displayed size, after orientation.
    public var width: Int
    public var height: Int
    /// The EXIF orientation that was applied (1 when none, and for HEIF).
    public var orientation: Int
    /// HEIF/AVIF only: which image of the file made the variants (`HEIF.usableThumbnail`).
    public var decodedFrom: DecodedImage? = nil
    public enum DecodedImage: String, Sendable, Codable { case thumbnail, primary }
}

/// The working image, in whichever form the decoder left it.
enum WorkingImage {
    /// Packed RGB: a JPEG with nothing for libvips to do (YCbCr or RGB without an
    /// ICC profile: already sRGB; the orient step turns it upright). Handing it through
    /// a libvips image cost a pipeline and its thread hand-offs per snap.
    case rgb(PackedRGB)
    case vips(VImage)

    /// As a libvips image (copies packed pixels).
    func vipsImage() throws -> VImage {
        switch self {
        case .rgb(let packed):
            guard packed.isWhole else { throw SnapError(.internal, "only the centre of the image was decoded") }
            try DecodeStep.startLibvips()
            return try VImage.fromRGB(packed.pixels, width: packed.width, height: packed.height)
        case .vips(let image): return image
        }
    }
}

/// Packed 8-bit RGB of a `width`×`height` image, of which `pixels` may hold only
/// `region`: for a centre crop only the centre square and the resampler's reach
/// around it are decoded (libjpeg skips the IDCT and colour conversion of the rest).
struct PackedRGB {
    var pixels: [UInt8]
    var region: PixelRegion
    var width: Int, height: Int

    init(pixels: [UInt8], region: PixelRegion, width: Int, height: Int) {
        self.pixels = pixels
        self.region = region
        self.width = width
        self.height = height
    }

    init(pixels: [UInt8], width: Int, height: Int) {
        self.init(pixels: pixels, region: PixelRegion(left: 0, top: 0, width: width, height: height), width: width, height: height)
    }

    var isWhole: Bool { region == PixelRegion(left: 0, top: 0, width: width, height: height) }

}

extension Settings.FailOn {
    /// libvips' `VipsFailOn` value.
    var vipsLevel: Int {
        switch self {
        case .truncated: return 1
        case .error: return 2
        case .warning: return 3
        }
    }
}

extension PipelineStep {
    /// Reads the header, checks the format and limits, and decodes once with
    /// shrink-on-load to at least twice what the largest variant needs.
    static let decode = PipelineStep(name: "decode") { snap in
        let (header, image) = try DecodeStep.run(snap.source, settings: snap.settings, need: snap.need, onImage: snap.onImage)
        snap.header = header
        snap.image = image
    }
}

enum DecodeStep {
    /// Starts libvips the first time an image needs it. A plain JPEG (the usual
    /// snap) goes from libjpeg to the encoders without it, and a worker that never
    /// meets anything else never pays libvips' start (loading its modules: about
    /// 16 ms, on the critical path of every backfill).
    static func startLibvips() throws {
        do { try Vips.start() } catch { throw SnapError(.internal, "libvips failed to start: \(error)") }
    }

    /// Reads the header, checks limits, and decodes once with shrink-on-load: the
    /// image as stored (colour and orientation are the next steps' work).
    /// - Parameter need: the largest square side any variant takes from this image.
    static func run(_ source: SourceBuffer, settings: Settings, need: Int,
                    onImage: (any Killable) -> Void = { _ in }) throws -> (ImageHeader, WorkingImage) {
        let limits = settings.limits
        guard source.count > 0 else { throw SnapError(.corrupt, "the file is empty (0 bytes)") }
        guard source.count <= limits.maxInputBytes else {
            throw SnapError(.tooLarge, "input is \(source.count) bytes, over the limit of \(limits.maxInputBytes) bytes (limits.maxInputBytes)")
        }
        // JPEG (SOI marker, the test libvips' jpegload uses): libjpeg directly.
        if source.count >= 2, source.bytes(0..<2) == [0xFF, 0xD8] {
            let decoder: JPEGDecoder
            do {
                decoder = try JPEGDecoder(source, failOn: settings.failOn.vipsLevel)
            } catch let error as VipsError {
                throw SnapError(.corrupt, "cannot read the jpeg header: \(error.message)", cause: error.description)
            }
            if decoder.isDecodable {
                let header = ImageHeader(format: .jpeg, width: decoder.width, height: decoder.height,
                                         fullDecode: decoder.isMultiscan, exif: decoder.exif, profile: decoder.iccProfile)
                try header.checkLimits(limits)
                let shrink = jpegShrink(short: min(header.width, header.height), need: need)
                do {
                    onImage(decoder)
                    if decoder.colourSpace == .ycbcr || decoder.colourSpace == .rgb, header.profile == nil {
                        // Already sRGB: packed pixels, no libvips image.
                        // A centre crop needs only the centre (what every variant reads).
                        let region = settings.square.crop == .centre && !settings.square.faces
                            ? centreRegion(width: header.width / shrink, height: header.height / shrink,
                                           smallestSide: min(settings.square.size, 4 * settings.pixel.grid))
                            : nil
                        let decoded = try decoder.decodePixels(shrink: shrink, region: region)
                        return (header, .rgb(PackedRGB(pixels: decoded.pixels, region: decoded.region,
                                                       width: decoded.fullWidth, height: decoded.fullHeight)))
                    }
                    try startLibvips()
                    return (header, .vips(try decoder.decode(shrink: shrink)))
                } catch let error as VipsError {
                    throw SnapError(.corrupt, "the jpeg data is damaged or truncated: \(error.message)", cause: error.description)
                }
            }
            // Anything else libjpeg reads (odd component layouts): libvips' loader below.
        }

        try startLibvips()
        guard let loader = VImage.loaderName(for: source) else {
            throw SnapError(.unsupported, "not an image format SnapThumb reads (accepted: \(InputFormat.acceptedList))")
        }
        guard let format = InputFormat(loader: loader) else {
            let kind = loader.replacingOccurrences(of: "VipsForeignLoad", with: "").replacingOccurrences(of: "Buffer", with: "").uppercased()
            throw SnapError(.unsupported, "\(kind) images are not accepted (accepted: \(InputFormat.acceptedList))", cause: loader)
        }

        // Header only: dimensions, profile and EXIF, no pixels.
        let opened: VImage
        do {
            opened = try VImage.load(source, options: "access=sequential")
        } catch let error as VipsError {
            throw SnapError(.corrupt, "cannot read the \(format.rawValue) header: \(error.message)", cause: error.description)
        }
        // Formats that cannot stream hold every pixel in memory.
        var header = ImageHeader(
            format: format, width: opened.width, height: opened.height,
            fullDecode: format == .heif || opened.int("interlaced") == 1 || opened.int("jpeg-multiscan") == 1,
            exif: format.appliesOwnOrientation ? nil : opened.blob("exif-data"),
            profile: opened.blob("icc-profile-data"))
        try header.checkLimits(limits)
        // Shrink on load as far as twice the largest variant allows.
        let shortSide = min(header.width, header.height)
        var options = "access=sequential,fail_on=\(settings.failOn.rawValue)"
        var loadedShort = Double(shortSide)
        switch format {
        case .jpeg:
            let shrink = jpegShrink(short: shortSide, need: need)
            if shrink > 1 { options += ",shrink=\(shrink)"; loadedShort = Double(shortSide) / Double(shrink) }
        case .webp:
            // libwebp scales while decoding; keep a 2× margin for the resampler.
            let scale = Double(2 * need + 1) / Double(shortSide)
            if scale < 1 { options += ",scale=\(String(format: "%.6f", scale))"; loadedShort = Double(shortSide) * scale }
        case .heif:
            // A phone's HEIC holds a 240×320 thumbnail beside its 12 MP primary image: used when it
            // is twice `need` (as a shrink-on-load decode) and of the same shape. libheif applies its
            // transform boxes; the colour step converts it with the primary's profile, as the primary.
            let thumbnail = HEIF.usableThumbnail(source, primarySize: (header.width, header.height), minShortSide: 2 * need)
            header.decodedFrom = thumbnail == nil ? .primary : .thumbnail
            if let thumbnail { options += ",thumbnail=true"; loadedShort = Double(min(thumbnail.width, thumbnail.height)) }
        case .png, .gif:
            break
        }

        var image: VImage
        do {
            image = try VImage.load(source, options: options)
            // Formats without shrink-on-load: reduce while streaming, before
            // holding the pixels, so that memory follows the output size.
            // (A shrink-on-load result up to 4× the output goes straight to the
            // square resampler: one Lanczos pass is cheaper than two.)
            if loadedShort > Double(4 * need) {
                image = try reduce(image, by: Double(2 * need) / loadedShort)
            }
            onImage(image)
            image = try image.materialized()
        } catch let error as VipsError {
            throw SnapError(.corrupt, "the \(format.rawValue) data is damaged or truncated: \(error.message)", cause: error.description)
        }
        return (header, .vips(image))
    }

    /// libjpeg's largest scale-down that keeps twice `need` pixels on the short
    /// side: the resampler then reduces by 2× or more. Decoding a snap at 1/8 and
    /// stretching it 1.35× lost a third of the square's SSIMULACRA2 score before
    /// any encoding (README: Quality per byte); 1/4 costs about 1 ms more.
    static func jpegShrink(short: Int, need: Int) -> Int {
        [8, 4, 2].first { short / $0 >= 2 * need } ?? 1
    }

    /// The part of a `width`×`height` image that centre squares down to `smallestSide`
    /// read: the centre square and, along the long side, Lanczos3's reach past it
    /// (3 output pixels, 3 · short / side input pixels) and a few pixels more.
    /// Nil when that is the whole image. The same region is the centre whatever
    /// the orientation.
    static func centreRegion(width: Int, height: Int, smallestSide: Int) -> PixelRegion? {
        let short = min(width, height), long = max(width, height)
        let margin = (3 * short + smallestSide - 1) / max(1, smallestSide) + 4
        let start = max(0, (long - short) / 2 - margin), end = min(long, (long + short + 1) / 2 + margin)
        guard end - start < long else { return nil }
        return width > height ? PixelRegion(left: start, top: 0, width: end - start, height: height)
                              : PixelRegion(left: 0, top: start, width: width, height: end - start)
    }

    /// Lanczos reduction that does not darken edges of transparent areas.
    private static func reduce(_ image: VImage, by scale: Double) throws -> VImage {
        guard image.hasAlpha else { return try image.resized(scale) }
        // premultiply works in float: go back to the input's format afterwards.
        let format = image.format
        return try image.premultiplied().resized(scale).unpremultiplied().cast(to: format)
    }
}

/// What the header says, whichever decoder read it.
struct ImageHeader {
    let format: InputFormat
    /// Stored size, before orientation.
    let width: Int, height: Int
    /// The decoder must hold every pixel (or coefficient) at once.
    let fullDecode: Bool
    let profile: [UInt8]?
    /// The EXIF orientation to apply, 1–8 (1 when absent or nonsense; always 1
    /// for HEIF, whose own transforms libheif applies).
    let orientation: Int
    var decodedFrom: SourceInfo.DecodedImage?

    init(format: InputFormat, width: Int, height: Int, fullDecode: Bool, exif: [UInt8]?, profile: [UInt8]?) {
        self.format = format
        self.width = width
        self.height = height
        self.fullDecode = fullDecode
        self.profile = profile
        orientation = normalisedOrientation(exif.map(Exif.orientation) ?? 0)
    }

    func checkLimits(_ limits: Settings.Limits) throws {
        let pixels = width * height
        guard pixels <= limits.maxPixels else {
            throw SnapError(.tooLarge, "image is \(width)×\(height) = \(pixels) pixels, over the limit of \(limits.maxPixels) pixels (limits.maxPixels)")
        }
        guard !fullDecode || pixels <= limits.maxPixelsFullDecode else {
            let kind = format == .heif ? "HEIF/AVIF" : format == .png ? "interlaced PNG" : "progressive JPEG"
            throw SnapError(.tooLarge, "\(kind) image is \(width)×\(height) = \(pixels) pixels and must be decoded whole; the limit for such images is \(limits.maxPixelsFullDecode) pixels (limits.maxPixelsFullDecode)")
        }
    }

    /// Width and height after orientation.
    var upright: (width: Int, height: Int) { OrientationFix(exif: orientation).swapsAxes ? (height, width) : (width, height) }

    /// The manifest's `source` object: displayed size, after orientation.
    func sourceInfo(_ source: SourceBuffer, digest: String) -> SourceInfo {
        let swapsAxes = OrientationFix(exif: orientation).swapsAxes
        return SourceInfo(
            digest: digest, bytes: source.count, mediaType: mediaType(source),
            width: swapsAxes ? height : width,
            height: swapsAxes ? width : height,
            orientation: orientation, decodedFrom: decodedFrom)
    }

    private func mediaType(_ source: SourceBuffer) -> String {
        switch format {
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case .webp: return "image/webp"
        case .gif: return "image/gif"
        case .heif:
            // The ftyp box's major brand tells HEIC from AVIF from generic HEIF.
            let brand = String(decoding: source.bytes(8..<12), as: UTF8.self)
            switch brand {
            case "avif", "avis": return "image/avif"
            case "heic", "heix", "heim", "heis", "hevc", "hevx": return "image/heic"
            default: return "image/heif"
            }
        }
    }
}
