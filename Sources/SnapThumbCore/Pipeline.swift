import Foundation
import VipsKit
import SystemKit

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
    public var path: String { StoreLayout.blobPath(hex) }
    public var digest: String { "sha256:\(hex)" }
}

/// Everything one upload produced: the manifest and the blobs it points at.
public struct ProcessedUpload: Sendable {
    public let manifest: Manifest
    public let blobs: [Blob]

    public init(manifest: Manifest, blobs: [Blob]) {
        self.manifest = manifest
        self.blobs = blobs
    }
}

/// The thumbnail pipeline for one upload. The whole algorithm is this list, run in
/// order over one `Snap` (each step is in `Steps/`, in a file named after it):
public struct Pipeline: Sendable {
    static let steps: [PipelineStep] = [
        .decode,              // header, format allowlist, size limits, one decode with shrink-on-load
        .colour,              // embedded profile → sRGB, 8-bit, alpha flattened onto the background
        .orient,              // EXIF orientation, applied once
        .faces,               // faces found (YuNet) and where the square keeps them
        .square,              // centre (or attention) crop, Lanczos to square.size
        .grid,                // pixel.grid × pixel.grid block means of the same crop
        .pixelArt,            // palette, pixel25 and pixel100 PNGs within their budgets
        .encodeWithinBudget,  // square100: the best JPEG quality that fits its budget
        .encodeModernWithinBudget, // square100-avif/-heic, only when asked: the same pixels, same budget
        .hash,                // SHA-256 of every variant: content-addressed blobs
    ]

    public let settings: Settings
    public let recipe: Recipe

    /// Validates `settings`. libvips starts on first use, so a process that only
    /// orchestrates workers (backfill, bench) never loads it.
    public init(settings: Settings = Settings()) throws {
        try settings.validate()
        if let codec = settings.square.modern { try ModernEncoderCheck.require(codec) }
        try FaceSupport.require(settings)
        self.settings = settings
        recipe = Recipe(settings: settings)
    }

    /// Processes encoded bytes uploaded under `key`. Pure computation: nothing touches
    /// the disk (see `Store`). Safe to call from several threads at once.
    /// - Parameter onImage: receives the decoder (or lazily decoding image) before pixels are
    ///   pulled, so that a supervisor can `kill()` it (per-image time limits).
    /// - Parameter sourceDigest: `sha256:<hex>` of `source`, when the caller has
    ///   already hashed it (to look for its manifest): the source is hashed once.
    public func process(_ source: SourceBuffer, key: String, sourceDigest: String? = nil,
                        onImage: @escaping (any Killable) -> Void = { _ in }) throws -> ProcessedUpload {
        try StoreKey.validate(key)
        var snap = Snap(source: source, sourceDigest: sourceDigest, settings: settings, onImage: onImage)
        try Pipeline.run(Pipeline.steps, on: &snap)
        let header = try snap.required(snap.header, "the header")
        let variants = Dictionary(uniqueKeysWithValues: zip(snap.encoded, snap.blobs).map { encoded, blob in
            (encoded.name, Variant(
                digest: blob.digest, path: blob.path, mediaType: encoded.mediaType, width: encoded.side, height: encoded.side,
                bytes: blob.bytes.count, base64Length: Budget.base64Length(blob.bytes.count), budget: encoded.budget, budgetMode: settings.budgetMode,
                quality: encoded.fitted.quality, colours: encoded.colours, palette: encoded.palette, dither: encoded.dither,
                encodes: encoded.fitted.encodes, degraded: encoded.fitted.degraded))
        })
        let manifest = Manifest(key: key, source: header.sourceInfo(snap.source, digest: snap.sourceDigest),
                                variants: variants, recipe: recipe, crop: snap.crop)
        return ProcessedUpload(manifest: manifest, blobs: snap.blobs)
    }

    /// The runner: each step in turn. Decode, colour and orient say what is wrong with
    /// the input themselves; a libvips failure after them is ours (`internal`).
    static func run(_ steps: [PipelineStep], on snap: inout Snap) throws {
        for step in steps {
            do {
                try step.run(&snap)
            } catch let error as VipsError {
                throw SnapError(.internal, "libvips failed while making thumbnails (\(step.name)): \(error)", cause: error.description)
            }
        }
    }
}
