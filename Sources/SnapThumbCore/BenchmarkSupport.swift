import Foundation
import VipsKit

/// The pipeline's stages one at a time, for the stage benchmarks in `Benchmarks/`
/// (`@_spi(Benchmarks) import SnapThumbCore`). Not API: the stages stay internal,
/// and this surface may change with them.
@_spi(Benchmarks) public enum BenchmarkSupport {
    /// Decode (header, limits, shrink-on-load, sRGB, orientation) and the square
    /// crop that square100 and the pixel-art grid are made from: packed RGB.
    public static func decodeSquare(_ bytes: [UInt8], settings: Settings = Settings()) throws -> [UInt8] {
        let snap = try DecodeStep.run(SourceBuffer(bytes), digest: "sha256:bench", settings: settings,
                                      need: max(settings.square.size, 4 * settings.pixel.grid))
        let side = settings.square.size
        return try squarePixels(snap.image, side: side, crop: settings.square.crop)
    }

    /// The square100 JPEG within its budget, from `decodeSquare`'s pixels.
    /// Returns the JPEG's size and how many encodes the search took.
    public static func budgetSearch(square rgb: [UInt8], settings: Settings = Settings()) throws -> (bytes: Int, encodes: Int) {
        let side = settings.square.size
        let fitted = try JPEGBudgetSearch.fit(
            range: settings.square.qualityMin...settings.square.qualityMax,
            budget: settings.square.budget.map { Budget(limit: $0, mode: settings.budgetMode) },
            encode: { try JPEG.encode(rgb: rgb, width: side, height: side, quality: $0) })
        return (fitted.bytes.count, fitted.encodes)
    }

    /// pixel25 and pixel100 (grid, palette, both PNGs within budget) from
    /// `decodeSquare`'s pixels (square size 4 × grid). Returns their total bytes.
    public static func pixelArt(square rgb: [UInt8], settings: Settings = Settings()) throws -> Int {
        let grid = settings.pixel.grid
        let gridRGB = boxShrink(rgb: rgb, side: 4 * grid, factor: 4)
        let art = try PixelArtStep.run(rgb: gridRGB, grid: grid, settings: settings.pixel, mode: settings.budgetMode)
        return art.grid.bytes.count + art.large.bytes.count
    }

    /// The whole pipeline on encoded bytes, nothing stored.
    public static func process(_ pipeline: Pipeline, _ bytes: [UInt8], key: String) throws -> ProcessedUpload {
        try pipeline.process(SourceBuffer(bytes), key: key)
    }

    /// SHA-256 of each output (made unique by `salt`, so that every call writes new
    /// blobs) and one durable commit (blobs, manifest, fsyncs) into `store`.
    public static func hashAndStore(_ upload: ProcessedUpload, salt: Int, store: Store) throws {
        let blobs = upload.blobs.map { Blob($0.bytes + withUnsafeBytes(of: salt) { Array($0) }) }
        if let error = store.commitBatch([ProcessedUpload(manifest: upload.manifest, blobs: blobs)]).first ?? nil { throw error }
    }

    /// The manifest's canonical JSON, as written to the store.
    public static func manifestJSON(_ upload: ProcessedUpload) -> Data { upload.manifest.json() }
}
