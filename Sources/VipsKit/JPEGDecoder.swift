import SystemKit
internal import CJPEGShim
internal import CKernelShim

/// Something whose decode another thread can stop (a per-image time limit).
public protocol Killable: AnyObject, Sendable {
    func kill()
}

extension VImage: Killable {}

/// A JPEG decoded with libjpeg directly: the scaled decode libvips' jpegload
/// does with `shrink` (the same library and defaults, byte-identical pixels and
/// the same size rounding), without a libvips pipeline and its thread hand-offs
/// around the decoder. Decoding a 12 MP photo at 1/8 cost about 11 % less CPU this
/// way, a 1080×1440 snap about 40 % less.
public final class JPEGDecoder: Killable, @unchecked Sendable {  // @unchecked: a libjpeg handle; one thread decodes, kill() from another only sets an atomic flag
    /// libjpeg's colour spaces, as far as SnapThumb decodes them here.
    public enum ColourSpace: Sendable, Equatable {
        case grey, rgb, ycbcr, cmyk, ycck, other(Int)
    }

    private let handle: OpaquePointer
    /// Keeps the encoded bytes alive: libjpeg reads them in place.
    private let source: SourceBuffer
    public let width: Int
    public let height: Int
    public let components: Int
    public let colourSpace: ColourSpace
    /// Progressive (or otherwise multi-scan): libjpeg holds every coefficient in memory.
    public let isMultiscan: Bool
    /// The first APP1 "Exif" payload, as libvips' `exif-data`.
    public let exif: [UInt8]?
    /// The ICC profile from the APP2 chunks, as libvips' `icc-profile-data`.
    public let iccProfile: [UInt8]?

    /// Reads the header.
    /// - Parameters:
    ///   - failOn: libvips' `fail_on` level (0 none, 1 truncated, 2 error, 3 warning).
    ///   - ownHuffmanDecoder: false decodes with libjpeg alone (its Huffman decoder
    ///     and its IDCT loop, not our paired IDCTs): the reference ours is tested
    ///     against, and bench's decode floor.
    public init(_ source: SourceBuffer, failOn: Int, ownHuffmanDecoder: Bool = true) throws {
        var raw: OpaquePointer?
        var info = snap_jpeg_info()
        let status = source.withBytes { snap_jpeg_open($0.baseAddress, $0.count, Int32(failOn), &raw, &info) }
        guard status == 0, let raw else {
            let message = String(cString: snap_jpeg_message_text(raw))
            snap_jpeg_close(raw)
            throw VipsError(operation: "jpeg_header", message: message)
        }
        handle = raw
        if !ownHuffmanDecoder { snap_jpeg_libjpeg_entropy(raw) }
        self.source = source
        width = Int(info.width)
        height = Int(info.height)
        components = Int(info.components)
        switch info.colour_space {
        case 1: colourSpace = .grey
        case 2: colourSpace = .rgb
        case 3: colourSpace = .ycbcr
        case 4: colourSpace = .cmyk
        case 5: colourSpace = .ycck
        default: colourSpace = .other(Int(info.colour_space))
        }
        isMultiscan = info.multiscan != 0
        exif = info.exif.map { Array(UnsafeBufferPointer(start: $0, count: info.exif_len)) }
        iccProfile = info.icc.map { Array(UnsafeBufferPointer(start: $0, count: info.icc_len)) }
    }

    deinit { snap_jpeg_close(handle) }

    /// Whether `decode` handles this colour space (grey, RGB, YCbCr, CMYK, YCCK).
    public var isDecodable: Bool {
        if case .other = colourSpace { return false }
        return true
    }

    /// Decodes at 1/`shrink` (1, 2, 4 or 8) into an 8-bit image: sRGB, B_W or CMYK.
    /// Call once.
    public func decode(shrink: Int) throws -> VImage {
        try decodePacked(shrink: shrink) { pixels, width, height, bands, cmyk in
            try VImage.fromMemory(pixels, width: width, height: height, bands: bands, cmyk: cmyk)
        }
    }

    /// Packed 8-bit pixels as libjpeg decodes them at 1/`shrink` (the same as
    /// `decode(shrink:)`, without a libvips image). With `region` (in the 1/`shrink`
    /// image) only that part is decoded, its left edge moved to an iMCU boundary;
    /// `region` in the result says what came out (the whole image without one).
    ///
    /// A region is not always the same pixels as there in a whole decode: where it
    /// cuts columns (`jpeg_crop_scanline`), libjpeg-turbo decodes it as an image of
    /// its own width. In horizontally subsampled files (4:2:0, 4:2:2) at 1/1, 1/2
    /// and 1/4, fancy upsampling then treats the region's first and last columns as
    /// image edges: those two columns can differ by a few levels. In a progressive
    /// file with incomplete scans (damaged, decoded at fail_on none), block smoothing
    /// can change its first and last two block columns. And libjpeg-turbo 2.1 crops
    /// 4:1:0 files (4×2 or 2×4 luma) wrongly at 1/2 and 1/4: the region's colours are
    /// wrong throughout. Rows (`jpeg_skip_scanlines`) keep the whole decode's pixels.
    /// The centre square's resampler stops at least 4 pixels inside the region
    /// (`DecodeStep.centreRegion`), so the edge columns never reach a square; the
    /// smoothed block columns and the 4:1:0 crop can.
    /// (docs/performance.md, "The decoder against libjpeg-turbo"; `Scripts/fuzz-decoder.sh`
    /// checks the rest against a whole decode.)
    public func decodePixels(shrink: Int, region: PixelRegion? = nil) throws -> DecodedPixels {
        precondition([1, 2, 4, 8].contains(shrink), "libjpeg scales by 1/1, 1/2, 1/4 or 1/8")
        var capacity = 0
        guard snap_jpeg_decode_capacity(handle, Int32(shrink), &capacity) == 0 else {
            throw VipsError(operation: "jpeg_decode", message: String(cString: snap_jpeg_message_text(handle)))
        }
        // Straight into the array's storage: no second copy of the image.
        var width: Int32 = 0, height: Int32 = 0, bands: Int32 = 0, cmyk: Int32 = 0
        var status: Int32 = -1
        var asked: [Int32] = region.map { [Int32($0.left), Int32($0.top), Int32($0.width), Int32($0.height)] } ?? [0, 0, 0, 0]
        let pixels = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
            status = asked.withUnsafeMutableBufferPointer {
                snap_jpeg_decode_into(handle, Int32(shrink), buffer.baseAddress, capacity, &width, &height, &bands, &cmyk, $0.baseAddress)
            }
            count = status == 0 ? Int(width) * Int(height) * Int(bands) : 0
        }
        guard status == 0 else {
            throw VipsError(operation: "jpeg_decode", message: String(cString: snap_jpeg_message_text(handle)))
        }
        let whole = (width: Int(self.width) / shrink, height: Int(self.height) / shrink)
        let part = region == nil
            ? PixelRegion(left: 0, top: 0, width: whole.width, height: whole.height)
            : PixelRegion(left: Int(asked[0]), top: Int(asked[1]), width: Int(asked[2]), height: Int(asked[3]))
        return DecodedPixels(pixels: pixels, width: Int(width), height: Int(height), bands: Int(bands), cmyk: cmyk != 0,
                             region: part, fullWidth: whole.width, fullHeight: whole.height)
    }

    private func decodePacked<T>(shrink: Int, _ body: (UnsafePointer<UInt8>, Int, Int, Int, Bool) throws -> T) throws -> T {
        precondition([1, 2, 4, 8].contains(shrink), "libjpeg scales by 1/1, 1/2, 1/4 or 1/8")
        var pixels: UnsafeMutablePointer<UInt8>?
        var width: Int32 = 0, height: Int32 = 0, bands: Int32 = 0, cmyk: Int32 = 0
        let status = snap_jpeg_decode(handle, Int32(shrink), &pixels, &width, &height, &bands, &cmyk)
        guard status == 0, let pixels else {
            throw VipsError(operation: "jpeg_decode", message: String(cString: snap_jpeg_message_text(handle)))
        }
        defer { snap_free(pixels) }
        return try body(pixels, Int(width), Int(height), Int(bands), cmyk != 0)
    }

    public func kill() { snap_jpeg_kill(handle) }

    /// Whether the last decode's Huffman decoding was SnapThumb's own (a baseline
    /// single-scan file it read to the end, with libjpeg's coefficients) rather than
    /// libjpeg's, which takes progressive files and every file ours leaves to it.
    public var usedOwnHuffmanDecoder: Bool { snap_jpeg_entropy_used(handle) != 0 }
}

/// A rectangle of an image, in pixels.
public struct PixelRegion: Equatable, Sendable {
    public var left: Int, top: Int, width: Int, height: Int
    public init(left: Int, top: Int, width: Int, height: Int) {
        self.left = left
        self.top = top
        self.width = width
        self.height = height
    }
}

/// What `JPEGDecoder.decodePixels` made: `width` × `height` packed pixels, which
/// are `region` of the whole `fullWidth` × `fullHeight` decoded image.
public struct DecodedPixels: Sendable {
    public let pixels: [UInt8]
    public let width: Int, height: Int, bands: Int
    public let cmyk: Bool
    public let region: PixelRegion
    public let fullWidth: Int, fullHeight: Int
}
