import Foundation
import VipsKit
import SystemKit

/// Every knob of the pipeline, with the production defaults. Validated once at
/// the edge (`validate()`), then passed inward as one plain value.
///
/// Encoded as JSON this is also the config-file format: every field is optional
/// there and falls back to its default.
public struct Settings: Sendable, Equatable, Codable {
    /// Refuse input over these limits before any pixel is decoded.
    public var limits = Limits()
    /// How strict decoding is: `warning` (default, like sharp) refuses damaged
    /// files that libjpeg would otherwise fill with grey.
    public var failOn: FailOn = .warning
    /// What transparent pixels become (outputs have no alpha).
    public var background = Colour(red: 0x0A, green: 0x0A, blue: 0x1A)
    /// Whether budgets count raw bytes or base64 characters (`inline`, for push payloads).
    public var budgetMode: BudgetMode = .bytes
    /// In `inline` mode, the whole push payload the square travels in may be this
    /// many bytes (APNs: 4096)…
    public var payloadLimit = 4096
    /// …of which this many are kept for the rest of it: a Live Activity start
    /// payload's `aps` fields, sender name, caption, ids and alert (README: Inline budget).
    public var payloadReserve = Settings.defaultPayloadReserve
    /// A key that arrives again with other source bytes: refused (`conflict`) or replaced.
    public var onConflict: ConflictPolicy = .refuse
    /// The `square100` JPEG.
    public var square = SquareSettings()
    /// The `pixel25` and `pixel100` palette PNGs.
    public var pixel = PixelSettings()

    public init() {}

    /// Room for a Live Activity start payload without its thumbnail: the README's
    /// example is 665 bytes with a 30-character sender name with emoji and a
    /// 40-character caption (LiveActivityPayloadTests); the rest is room for longer
    /// ids and alert text, while the thumbnail keeps 3196 base64 characters.
    public static let defaultPayloadReserve = 900

    /// The square's budget as applied: in `inline` mode its base64 must also fit the
    /// payload's room, `payloadLimit - payloadReserve`.
    public var squareBudget: Int? {
        guard budgetMode == .inline else { return square.budget }
        return min(square.budget ?? Int.max, payloadLimit - payloadReserve)
    }

    public struct Limits: Sendable, Equatable, Codable {
        /// Largest accepted input file, in bytes.
        public var maxInputBytes = 64 << 20
        /// Largest accepted image, in pixels (width × height, first frame).
        public var maxPixels = 100_000_000
        /// Largest accepted image that cannot be decoded while streaming (HEIC/AVIF,
        /// progressive JPEG, interlaced PNG): those hold every pixel at about
        /// 7 bytes each, so 50 MP is ~350 MB per job. 48 MP iPhone photos fit.
        public var maxPixelsFullDecode = 50_000_000
        public init() {}
    }

    public enum FailOn: String, Sendable, Codable, CaseIterable {
        case truncated, error, warning
    }

    public enum BudgetMode: String, Sendable, Codable, CaseIterable {
        /// The encoded size in bytes must fit.
        case bytes
        /// The base64 length must fit (the thumbnail travels inside a JSON payload).
        case inline
    }

    public struct SquareSettings: Sendable, Equatable, Codable {
        /// Side in pixels.
        public var size = 100
        public var crop: CropMode = .centre
        /// Faces first (issue 38): the square is placed to keep the faces a detector finds,
        /// and `crop` is only the fallback when there are none.
        public var faces = true
        /// Byte budget; nil for none.
        public var budget: Int? = 4096
        /// The quality search range; below `qualityMin` the variant is marked degraded.
        public var qualityMin = 40
        /// 100: at 100 px a budget of a few KB is usually reached between 85 and
        /// 100, and stopping at 90 left a fifth of the budget unused.
        public var qualityMax = 100
        /// Chroma subsampling: 4:4:4 scores higher than 4:2:0 at equal bytes on
        /// 100 px squares (README: Quality per byte).
        public var chroma: JPEG.Chroma = .c444
        /// A second square of the same pixels in AVIF or HEIC under the same budget
        /// (`square100-avif`, `square100-heic`); nil (the default): none.
        public var modern: HEIF.Codec? = nil
        /// libvips' heifsave effort for it, 0–9 (libaom speed 9 − effort), chosen from
        /// measured quality and time (docs/performance.md: Modern variant). 4 (libaom speed 5)
        /// is the lowest effort whose squares score at least `avifenc` speed 6's at every
        /// budget (issue 29); 1 is about ten times cheaper and about 2 points lower.
        public var modernEffort = Settings.SquareSettings.defaultModernEffort
        public static let defaultModernEffort = 4
        public init() {}
    }

    public struct PixelSettings: Sendable, Equatable, Codable {
        /// How the grid is drawn: `drawn` (default), `soft` (the block-mean look of pipeline
        /// version 4 and before, byte for byte) or `retro` (docs/pixel-art.md).
        public var style: PixelStyle = .drawn
        /// Side of the pixel grid (`pixel25` is grid × grid).
        public var grid = 25
        /// Largest palette size, 2–256.
        public var colours = 16
        public var palette: PaletteChoice = .adaptive
        /// Dithering when mapping to the palette: 4×4 ordered (Bayer) in the `drawn` style,
        /// Floyd–Steinberg in `soft`; `retro` always dithers (ordered).
        public var dither = false
        /// `pixel100` is `pixel25` scaled by this factor with nearest neighbour.
        public var scale = 4
        /// Budget of `pixel100`; nil for none.
        public var budget: Int? = 4096
        /// Budget of `pixel25`; nil for none.
        public var gridBudget: Int? = 4096
        public init() {}

        /// The palette used: `retro` with the default `adaptive` takes PICO-8's.
        public var effectivePalette: PaletteChoice {
            style == .retro && palette == .adaptive ? .named("pico8") : palette
        }

        /// Whether the mapping dithers (`retro` always does).
        public var effectiveDither: Bool { dither || style == .retro }
    }

    /// The look of the pixel art (docs/pixel-art.md).
    public enum PixelStyle: String, Sendable, Codable, CaseIterable {
        /// Each cell the colour most of its pixels share, lightness and chroma lifted, the
        /// palette chosen and mapped in OKLab: reads as drawn.
        case drawn
        /// Each cell the mean of its pixels, libimagequant's palette, redmean mapping: the
        /// look before styles existed (pipeline version 4), the same bytes.
        case soft
        /// `drawn`'s cells with a stronger lift and a dark outline, mapped to a fixed palette
        /// (PICO-8 unless another fixed palette is set) with ordered dithering.
        case retro

        /// Parses a style name (case-insensitive); the error lists the styles.
        public static func parse(_ text: String, source: String) throws -> PixelStyle {
            guard let style = PixelStyle(rawValue: text.lowercased()) else {
                throw SnapError(.config, "\(source) must be one of \(allCases.map(\.rawValue).joined(separator: ", ")) (got '\(text)')")
            }
            return style
        }
    }
}

// MARK: - Decoding a config file: every field optional.

extension Settings {
    private enum Keys: String, CodingKey, CaseIterable {
        case limits, failOn, background, budgetMode, payloadLimit, payloadReserve, onConflict, square, pixel
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        try rejectUnknownKeys(decoder, Keys.self, in: "settings")
        limits = try c.decodeIfPresent(Limits.self, forKey: .limits) ?? Limits()
        failOn = try c.decodeIfPresent(FailOn.self, forKey: .failOn) ?? .warning
        background = try c.decodeIfPresent(Colour.self, forKey: .background) ?? Colour(red: 0x0A, green: 0x0A, blue: 0x1A)
        budgetMode = try c.decodeIfPresent(BudgetMode.self, forKey: .budgetMode) ?? .bytes
        payloadLimit = try c.decodeIfPresent(Int.self, forKey: .payloadLimit) ?? 4096
        payloadReserve = try c.decodeIfPresent(Int.self, forKey: .payloadReserve) ?? Settings.defaultPayloadReserve
        onConflict = try c.decodeIfPresent(ConflictPolicy.self, forKey: .onConflict) ?? .refuse
        square = try c.decodeIfPresent(SquareSettings.self, forKey: .square) ?? SquareSettings()
        pixel = try c.decodeIfPresent(PixelSettings.self, forKey: .pixel) ?? PixelSettings()
    }
}

extension Settings.Limits {
    private enum Keys: String, CodingKey, CaseIterable { case maxInputBytes, maxPixels, maxPixelsFullDecode }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        try rejectUnknownKeys(decoder, Keys.self, in: "limits")
        self.init()
        maxInputBytes = try c.decodeIfPresent(Int.self, forKey: .maxInputBytes) ?? maxInputBytes
        maxPixels = try c.decodeIfPresent(Int.self, forKey: .maxPixels) ?? maxPixels
        maxPixelsFullDecode = try c.decodeIfPresent(Int.self, forKey: .maxPixelsFullDecode) ?? maxPixelsFullDecode
    }
}

extension Settings.SquareSettings {
    private enum Keys: String, CodingKey, CaseIterable { case size, crop, faces, budget, qualityMin, qualityMax, chroma, modern, modernEffort }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        try rejectUnknownKeys(decoder, Keys.self, in: "square")
        self.init()
        faces = try c.decodeIfPresent(Bool.self, forKey: .faces) ?? true
        size = try c.decodeIfPresent(Int.self, forKey: .size) ?? size
        if let word = try c.decodeIfPresent(String.self, forKey: .crop) {
            // "center" is accepted as well as "centre"; the recipe always says "centre".
            guard let mode = CropMode(rawValue: word.lowercased() == "center" ? "centre" : word.lowercased()) else {
                throw SnapError(.config, "square.crop must be centre (or center) or attention (got '\(word)')")
            }
            crop = mode
        }
        if c.contains(.budget) { budget = try c.decodeIfPresent(Int.self, forKey: .budget) }
        qualityMin = try c.decodeIfPresent(Int.self, forKey: .qualityMin) ?? qualityMin
        qualityMax = try c.decodeIfPresent(Int.self, forKey: .qualityMax) ?? qualityMax
        if let text = try c.decodeIfPresent(String.self, forKey: .chroma) {
            guard let value = JPEG.Chroma(rawValue: text) else {
                throw SnapError(.config, "square.chroma must be \"444\" or \"420\" (got \"\(text)\")")
            }
            chroma = value
        }
        if let text = try c.decodeIfPresent(String.self, forKey: .modern) {
            modern = try Settings.SquareSettings.parseModern(text, source: "square.modern")
        }
        modernEffort = try c.decodeIfPresent(Int.self, forKey: .modernEffort) ?? modernEffort
    }

    /// `avif`, `heic` or `none` (nil).
    public static func parseModern(_ text: String, source: String) throws -> HEIF.Codec? {
        if text.lowercased() == "none" { return nil }
        guard let codec = HEIF.Codec(rawValue: text.lowercased()) else {
            throw SnapError(.config, "\(source) must be avif, heic or none (got '\(text)')")
        }
        return codec
    }
}

extension Settings.PixelSettings {
    private enum Keys: String, CodingKey, CaseIterable { case style, grid, colours, palette, dither, scale, budget, gridBudget }
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        try rejectUnknownKeys(decoder, Keys.self, in: "pixel")
        self.init()
        if let text = try c.decodeIfPresent(String.self, forKey: .style) {
            style = try Settings.PixelStyle.parse(text, source: "pixel.style")
        }
        grid = try c.decodeIfPresent(Int.self, forKey: .grid) ?? grid
        colours = try c.decodeIfPresent(Int.self, forKey: .colours) ?? colours
        palette = try c.decodeIfPresent(PaletteChoice.self, forKey: .palette) ?? palette
        dither = try c.decodeIfPresent(Bool.self, forKey: .dither) ?? dither
        scale = try c.decodeIfPresent(Int.self, forKey: .scale) ?? scale
        if c.contains(.budget) { budget = try c.decodeIfPresent(Int.self, forKey: .budget) }
        if c.contains(.gridBudget) { gridBudget = try c.decodeIfPresent(Int.self, forKey: .gridBudget) }
    }
}

/// Decoding keys that only exist as strings: a typo in a config file must be an
/// error, not a silently ignored setting.
private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Throws for a key the section does not know.
func rejectUnknownKeys<K: CodingKey & CaseIterable>(_ decoder: any Decoder, _ known: K.Type, in section: String) throws {
    let c = try decoder.container(keyedBy: AnyKey.self)
    let allowed = Set(K.allCases.map(\.stringValue))
    for key in c.allKeys where !allowed.contains(key.stringValue) {
        throw SnapError(.config, "unknown setting \"\(key.stringValue)\" in \(section); allowed: \(allowed.sorted().joined(separator: ", "))")
    }
}

// MARK: - Validation

extension Settings {
    /// Checks every value; the error names the setting, the value, and what is allowed.
    public func validate() throws {
        func check(_ ok: Bool, _ message: @autoclosure () -> String) throws {
            if !ok { throw SnapError(.config, message()) }
        }
        try check(limits.maxInputBytes >= 1, "limits.maxInputBytes must be at least 1 byte (got \(limits.maxInputBytes))")
        try check(limits.maxPixels >= 1, "limits.maxPixels must be at least 1 (got \(limits.maxPixels))")
        try check(limits.maxPixelsFullDecode >= 1, "limits.maxPixelsFullDecode must be at least 1 (got \(limits.maxPixelsFullDecode))")
        try check((8...1024).contains(square.size), "square size must be 8–1024 pixels (got \(square.size))")
        try check((1...100).contains(square.qualityMin) && (1...100).contains(square.qualityMax),
                  "JPEG quality range must lie within 1–100 (got \(square.qualityMin)–\(square.qualityMax))")
        try check(square.qualityMin <= square.qualityMax,
                  "JPEG quality minimum \(square.qualityMin) is above the maximum \(square.qualityMax)")
        try check((0...9).contains(square.modernEffort), "square.modernEffort must be 0–9 (got \(square.modernEffort))")
        for (name, budget) in [("square budget", square.budget), ("pixel100 budget", pixel.budget), ("pixel25 budget", pixel.gridBudget)] {
            if let budget { try check(budget >= 64, "\(name) must be at least 64 bytes, or none (got \(budget))") }
        }
        try check(payloadLimit >= 64, "payload limit must be at least 64 bytes (got \(payloadLimit))")
        try check(payloadReserve >= 0 && payloadLimit - payloadReserve >= 64,
                  "payload reserve must leave at least 64 bytes of the \(payloadLimit)-byte payload for the thumbnail (got \(payloadReserve))")
        try check((2...256).contains(pixel.colours), "pixel colours must be 2–256 (got \(pixel.colours))")
        try check((4...256).contains(pixel.grid), "pixel grid must be 4–256 cells (got \(pixel.grid))")
        try check((1...16).contains(pixel.scale), "pixel scale must be 1–16 (got \(pixel.scale))")
        try check(pixel.grid * pixel.scale <= 2048, "pixel grid × scale must be at most 2048 pixels (got \(pixel.grid * pixel.scale))")
        if case .custom(let colours) = pixel.palette {
            try check((2...256).contains(colours.count), "a custom palette needs 2–256 colours (got \(colours.count))")
        }
    }
}

/// What to do when an upload's key already has a manifest made from different source bytes.
public enum ConflictPolicy: String, Sendable, Codable, CaseIterable {
    /// Refuse the new upload (failure code `conflict`); the published manifest stays.
    case refuse
    /// Publish the new content over the old manifest (both digests are logged).
    case replace
}
