import Foundation
import VipsKit
import SystemKit

/// Manifest v1: what other services read for one upload. Its JSON field names
/// are a contract (see docs/manifest.v1.schema.json).
public struct Manifest: Sendable, Equatable, Codable {
    public static let schemaName = "snapthumb.manifest.v1"

    public var schema = Manifest.schemaName
    /// The upload's key: its file name (`process`) or path relative to the backfill root.
    public var key: String
    public var source: SourceInfo
    /// `square100`, `pixel25`, `pixel100`.
    public var variants: [String: Variant]
    public var recipe: Recipe
    /// Where the square came from (absent in manifests from before pipeline version 6).
    public var crop: CropInfo? = nil
    /// The SnapThumb that wrote this manifest (absent in manifests from before 0.9.0).
    public var producer: Producer? = Producer.current

    /// Canonical bytes: sorted keys, no escaped slashes; one line unless `pretty`
    /// (JSONEncoder's bytes with those options, written directly: `ManifestJSON`).
    public func json(pretty: Bool = false) -> Data {
        Data(ManifestJSON.bytes(self, pretty: pretty))
    }

    /// `json(pretty:)`'s bytes as an array (no copy into `Data`: the store writes these).
    public func jsonBytes(pretty: Bool = false) -> [UInt8] { ManifestJSON.bytes(self, pretty: pretty) }

    /// The same bytes through JSONEncoder: the definition `json(pretty:)` is tested against.
    public func encoderJSON(pretty: Bool = false) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        // Encoding plain structs of strings and numbers cannot fail.
        return try! encoder.encode(self)
    }

    public static func decode(_ data: Data) throws -> Manifest {
        try JSONDecoder().decode(Manifest.self, from: data)
    }
}

/// Where the square was cut (`crop` in the manifest): what placed it and the rectangle, in
/// the pixels of the upright original (`source.width` × `source.height`).
public struct CropInfo: Sendable, Equatable, Codable {
    /// What placed the square: faces were found and kept, or the fallback crop.
    public enum Source: String, Sendable, Codable { case faces, attention, centre }
    public var source: Source
    /// The rectangle (for `attention`, from the offsets libvips' thumbnail reports).
    public var left: Int?, top: Int?, width: Int?, height: Int?
    /// How many faces the detector found (absent when detection is off).
    public var faces: Int?

    public init(source: Source, left: Int? = nil, top: Int? = nil, width: Int? = nil, height: Int? = nil, faces: Int? = nil) {
        self.source = source; self.left = left; self.top = top; self.width = width; self.height = height; self.faces = faces
    }
}

/// One stored output.
public struct Variant: Sendable, Equatable, Codable {
    /// `sha256:<hex>` of the bytes.
    public var digest: String
    /// Relative to the store root: `blobs/sha256/<2 hex>/<64 hex>`.
    public var path: String
    public var mediaType: String
    public var width: Int
    public var height: Int
    public var bytes: Int
    /// Length of the bytes in base64 (with padding): what the variant adds to a push payload.
    public var base64Length: Int?
    /// The byte budget, or nil for none (written as `null`).
    public var budget: Int?
    public var budgetMode: Settings.BudgetMode
    /// JPEG quality (JPEG variants only).
    public var quality: Int?
    /// Palette size (PNG variants only).
    public var colours: Int?
    /// `adaptive`, a built-in palette name, or `custom` (PNG variants only).
    public var palette: String?
    public var dither: Bool?
    /// How many qualities the budget search tried (each an encode, or for square100 an
    /// exact entropy count of one transform of the square).
    public var encodes: Int
    /// True when the variant had to leave its normal quality range or colour count.
    public var degraded: Bool

    private enum CodingKeys: String, CodingKey {
        case digest, path, mediaType, width, height, bytes, base64Length, budget, budgetMode, quality, colours, palette, dither, encodes, degraded
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(digest, forKey: .digest)
        try c.encode(path, forKey: .path)
        try c.encode(mediaType, forKey: .mediaType)
        try c.encode(width, forKey: .width)
        try c.encode(height, forKey: .height)
        try c.encode(bytes, forKey: .bytes)
        try c.encodeIfPresent(base64Length, forKey: .base64Length)
        try c.encode(budget, forKey: .budget) // explicit null: "no budget" is information
        try c.encode(budgetMode, forKey: .budgetMode)
        try c.encodeIfPresent(quality, forKey: .quality)
        try c.encodeIfPresent(colours, forKey: .colours)
        try c.encodeIfPresent(palette, forKey: .palette)
        try c.encodeIfPresent(dither, forKey: .dither)
        try c.encode(encodes, forKey: .encodes)
        try c.encode(degraded, forKey: .degraded)
    }
}

/// What made the outputs: every setting that changes output bytes, the pipeline
/// version and the library versions. Equal digests mean equal outputs for equal input.
public struct Recipe: Sendable, Equatable, Codable {
    /// Bump when the pipeline changes its output for the same settings.
    /// 5: the `drawn` pixel-art style became the default (`soft` keeps version 4's bytes),
    /// and the AVIF square's colour box says sRGB.
    /// 6: faces first (issue 38): the square is placed around the faces found, and the
    /// drawn and retro grids keep faces light.
    /// 7: the face detector's input is reduced differently (whole-block means, then bilinear)
    /// and a box spanning the whole frame is no face: different faces, so different squares;
    /// when the faces do not all fit, the square keeps the largest with as many others as fit.
    /// 8: drawn and retro faces: one skin tone of the faces' own hue, the face gives back
    /// most of the lightness its lighter groups added; the palette's reserved slot is that tone.
    /// 9: the face detector skips photos in colour without a skin-coloured region (no faces
    /// there, so a centre or attention square where it once found some).
    /// 10: the detector's input is scaled with OpenCV's bit-exact bilinear resample.
    /// 11: drawn pixel art: a busy photo's lightness is drawn back toward its area average
    /// (drift at most 0.055), an adaptive palette's colours are as vivid as their cells and
    /// count face cells twice; drawn and retro faces keep their area average's lightness.
    /// 12: the face detector looks for skin on the decoded image itself and gives the network
    /// its whole area average (no bilinear step); landscape canvases 192 px wide are no longer
    /// widened. The same faces within a pixel or so, so squares may move by that much.
    /// 13: the ordered dither (retro) only where the lightness runs on straight through a
    /// cell, not on low-contrast textures.
    public static let pipelineVersion = 13

    public var digest: String
    public var version: Int
    public var libvips: String
    public var imagequant: String
    public var zlib: String
    /// libheif's version, when a modern square is made (absent otherwise).
    public var libheif: String?
    /// 1 on a one-CPU host making AVIF, absent otherwise: libaom's bytes with one thread differ
    /// from its bytes with several (which all agree), and libheif gives it one per CPU.
    public var aomThreads: Int?
    public var settings: OutputSettings

    /// The part of `Settings` that changes output bytes (limits and strictness
    /// only decide whether an input is accepted).
    public struct OutputSettings: Sendable, Equatable, Codable {
        public var background: Colour
        public var budgetMode: Settings.BudgetMode
        /// `inline` mode only (absent otherwise, so that other recipes keep their digests).
        public var payloadLimit: Int?
        public var payloadReserve: Int?
        public var square: Settings.SquareSettings
        public var pixel: Settings.PixelSettings
    }

    public init(settings: Settings) {
        let inline = settings.budgetMode == .inline
        let output = OutputSettings(background: settings.background, budgetMode: settings.budgetMode,
                                    payloadLimit: inline ? settings.payloadLimit : nil,
                                    payloadReserve: inline ? settings.payloadReserve : nil,
                                    square: settings.square, pixel: settings.pixel)
        version = Recipe.pipelineVersion
        libvips = Vips.version
        imagequant = Vips.imagequantVersion
        zlib = Vips.zlibVersion
        libheif = settings.square.modern == nil ? nil : (HEIF.libheifVersion ?? "unknown")
        aomThreads = settings.square.modern == .avif && HEIF.aomThreads == 1 ? 1 : nil
        self.settings = output
        digest = ""
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        digest = "sha256:" + SHA256.hex(try! encoder.encode(self))
    }
}

extension Settings.SquareSettings {
    private enum Keys: String, CodingKey { case size, crop, faces, budget, qualityMin, qualityMax, chroma, modern, modernEffort }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(size, forKey: .size)
        try c.encode(crop, forKey: .crop)
        try c.encode(faces, forKey: .faces)
        try c.encode(budget, forKey: .budget)
        try c.encode(qualityMin, forKey: .qualityMin)
        try c.encode(qualityMax, forKey: .qualityMax)
        try c.encode(chroma.rawValue, forKey: .chroma)
        // Only when asked for: without a modern square the recipe (and its digest) is
        // what it was before the setting existed, so existing stores are not redone.
        if let modern {
            try c.encode(modern.rawValue, forKey: .modern)
            // x265 ignores the effort (same bytes at 0 and 9): only AVIF's recipe names it.
            if modern == .avif { try c.encode(modernEffort, forKey: .modernEffort) }
        }
    }
}

extension Settings.PixelSettings {
    private enum Keys: String, CodingKey { case style, grid, colours, palette, dither, scale, budget, gridBudget }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(style.rawValue, forKey: .style)
        try c.encode(grid, forKey: .grid)
        try c.encode(colours, forKey: .colours)
        try c.encode(palette, forKey: .palette)
        try c.encode(dither, forKey: .dither)
        try c.encode(scale, forKey: .scale)
        try c.encode(budget, forKey: .budget)
        try c.encode(gridBudget, forKey: .gridBudget)
    }
}
