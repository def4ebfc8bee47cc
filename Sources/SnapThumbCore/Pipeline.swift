import Foundation
import VipsKit

/// One encoded output, ready for the store.
public struct Blob: Sendable, Equatable {
    /// Lower-case hex SHA-256 of `bytes`.
    public let hex: String
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        hex = SHA256.hex(bytes)
    }

    /// Where the store keeps it, relative to the store root.
    public var path: String { "blobs/sha256/\(hex.prefix(2))/\(hex)" }
    public var digest: String { "sha256:\(hex)" }
}

/// Everything one upload produced: the manifest and the blobs it points at.
public struct ProcessedUpload: Sendable {
    public let manifest: Manifest
    public let blobs: [Blob]
}

/// The thumbnail pipeline for one upload, in order:
///
///     decode (header, limits, shrink-on-load, sRGB, orientation)
///     → square100 (crop, JPEG within budget)
///     → pixel25 + pixel100 (grid, palette, PNGs within budget)
///     → manifest
///
/// Pure computation: nothing touches the disk here (see `Store`). Safe to call
/// from several threads at once.
public struct Pipeline: Sendable {
    public let settings: Settings
    public let recipe: Recipe

    /// Validates `settings`. libvips starts on first use, so a process that only
    /// orchestrates workers (backfill, bench) never loads it.
    public init(settings: Settings = Settings()) throws {
        try settings.validate()
        self.settings = settings
        recipe = Recipe(settings: settings)
    }

    /// Processes encoded bytes uploaded under `key`.
    /// - Parameter onImage: receives the decoder (or lazily decoding image) before pixels are
    ///   pulled, so that a supervisor can `kill()` it (per-image time limits).
    public func process(_ source: SourceBuffer, key: String, onImage: (any Killable) -> Void = { _ in }) throws -> ProcessedUpload {
        try StoreKey.validate(key)
        let sourceDigest = "sha256:" + source.sha256Hex
        let pixel = settings.pixel
        let need = max(settings.square.size, 4 * pixel.grid)

        let snap = try DecodeStep.run(source, digest: sourceDigest, settings: settings, need: need, onImage: onImage)
        do {
            let side = settings.square.size
            let square = try squarePixels(snap.image, side: side, crop: settings.square.crop)
            let jpeg = try JPEGBudgetSearch.fit(
                range: settings.square.qualityMin...settings.square.qualityMax,
                budget: settings.square.budget.map { Budget(limit: $0, mode: settings.budgetMode) },
                encode: { try JPEG.encode(rgb: square, width: side, height: side, quality: $0) })

            // The grid averages 4×4 blocks of a square crop made the same way as square100.
            let gridSource = 4 * pixel.grid == side
                ? square
                : try squarePixels(snap.image, side: 4 * pixel.grid, crop: settings.square.crop)
            let gridRGB = boxShrink(rgb: gridSource, side: 4 * pixel.grid, factor: 4)
            let art = try PixelArtStep.run(rgb: gridRGB, grid: pixel.grid, settings: pixel, mode: settings.budgetMode)

            let outputs: [(String, Fitted, String, Int)] = [
                ("square100", jpeg, "image/jpeg", settings.square.size),
                ("pixel25", art.grid, "image/png", pixel.grid),
                ("pixel100", art.large, "image/png", pixel.grid * pixel.scale),
            ]
            var blobs: [Blob] = []
            var variants: [String: Variant] = [:]
            for (name, fitted, mediaType, side) in outputs {
                let blob = Blob(fitted.bytes)
                blobs.append(blob)
                let isPNG = mediaType == "image/png"
                let budget = name == "square100" ? settings.square.budget : name == "pixel25" ? pixel.gridBudget : pixel.budget
                variants[name] = Variant(
                    digest: blob.digest, path: blob.path, mediaType: mediaType, width: side, height: side,
                    bytes: fitted.bytes.count, budget: budget, budgetMode: settings.budgetMode,
                    quality: fitted.quality, colours: isPNG ? art.colours : nil,
                    palette: isPNG ? pixel.palette.label : nil, dither: isPNG ? pixel.dither : nil,
                    encodes: fitted.encodes, degraded: fitted.degraded)
            }
            let manifest = Manifest(key: key, source: snap.info, variants: variants, recipe: recipe)
            return ProcessedUpload(manifest: manifest, blobs: blobs)
        } catch let error as VipsError {
            throw SnapError(.internal, "libvips failed while making thumbnails: \(error)", cause: error.description)
        }
    }

    /// Reads `path` (refusing files over the input limit before reading them) and processes it.
    public func process(file path: String, key: String, onImage: (any Killable) -> Void = { _ in }) throws -> ProcessedUpload {
        try process(InputFile.read(path, limit: settings.limits.maxInputBytes), key: key, onImage: onImage)
    }
}

/// The square crop as packed RGB. The centre crop is resampled here: libvips'
/// thumbnail of a 135×180 image in memory cost 1.6 ms of CPU, most of it setting
/// up its pipeline, against about 0.2 ms. `attention` needs libvips' interest measure.
func squarePixels(_ image: WorkingImage, side: Int, crop: CropMode) throws -> [UInt8] {
    switch image {
    case .rgb(let pixels, let width, let height) where crop == .centre:
        return try Resample.squareCentre(rgb: pixels, width: width, height: height, side: side)
    case .vips(let image) where crop == .centre && image.bands == 3 && image.isUChar:
        return try Resample.squareCentre(rgb: image.pixels(), width: image.width, height: image.height, side: side)
    default:
        return try image.vipsImage().thumbnail(width: side, height: side, crop: crop).pixels()
    }
}

/// Each output pixel is the rounded mean of a `factor`×`factor` block of packed RGB.
func boxShrink(rgb: [UInt8], side: Int, factor: Int) -> [UInt8] {
    let out = side / factor
    let area = factor * factor
    var result = [UInt8](repeating: 0, count: out * out * 3)
    for y in 0..<out {
        for x in 0..<out {
            for band in 0..<3 {
                var sum = 0
                for dy in 0..<factor {
                    let row = (y * factor + dy) * side
                    for dx in 0..<factor { sum += Int(rgb[(row + x * factor + dx) * 3 + band]) }
                }
                result[(y * out + x) * 3 + band] = UInt8((sum + area / 2) / area)
            }
        }
    }
    return result
}
