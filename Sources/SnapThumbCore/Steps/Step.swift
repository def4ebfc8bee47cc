import VipsKit
import SystemKit
import FaceKit

/// One named step of the pipeline: it reads what the steps before it left in the
/// `Snap` and adds its own part. `Pipeline.steps` lists them in order.
struct PipelineStep: Sendable {
    let name: String
    let run: @Sendable (inout Snap) throws -> Void
}

/// One upload on its way through the steps. The first four fields are given; each
/// later field is filled by the step named in its comment, and read by the steps after it.
struct Snap {
    /// The uploaded bytes.
    let source: SourceBuffer
    /// `sha256:<hex>` of `source`.
    let sourceDigest: String
    let settings: Settings
    /// Receives the decoder (or lazily decoding image) before pixels are pulled,
    /// so that a supervisor can `kill()` it (per-image time limits).
    let onImage: (any Killable) -> Void

    /// decode: what the header says (format, size, EXIF orientation, ICC profile).
    var header: ImageHeader?
    /// decode, then colour (sRGB, 8-bit, flattened), then orient (upright): the one
    /// image every variant is made from.
    var image: WorkingImage?
    /// faces: where the square is cut (nil: `settings.square.crop` decides) and the faces
    /// found, in the upright decoded image's pixels.
    var placement: (left: Int, top: Int, side: Int)?
    var faces: [FaceBox] = []
    /// faces: what the manifest says about the crop.
    var crop: CropInfo?
    /// grid: the faces' skin colour in the drawn grid, for a palette slot (nil: no face).
    var skin: Colour?
    /// grid: which of its cells lie in a face (empty: none), for the palette.
    var faceCells: [Bool] = []
    /// square: the square crop, packed RGB, `settings.square.size` on each side.
    var square: [UInt8] = []
    /// grid: the pixel-art grid, packed RGB, `settings.pixel.grid` on each side.
    var grid: [UInt8] = []
    /// pixel art and encode within budget: the encoded variants.
    var encoded: [EncodedVariant] = []
    /// hash: one blob per variant, content-addressed, in manifest order.
    var blobs: [Blob] = []

    init(source: SourceBuffer, sourceDigest: String? = nil, settings: Settings, onImage: @escaping (any Killable) -> Void = { _ in }) {
        self.source = source
        self.sourceDigest = sourceDigest ?? "sha256:" + source.sha256Hex
        self.settings = settings
        self.onImage = onImage
    }

    /// The largest square side any variant takes from the decoded image.
    var need: Int { max(settings.square.size, 4 * settings.pixel.grid) }

    /// A field an earlier step fills; reading it before then is a programming error
    /// in the step list, reported rather than trapped.
    func required<T>(_ value: T?, _ what: String) throws -> T {
        guard let value else { throw SnapError(.internal, "pipeline step order: \(what) is not there yet") }
        return value
    }
}

/// One encoded output and what the manifest says about it.
struct EncodedVariant {
    /// The manifest's name for it (`square100`, `pixel25`, `pixel100`).
    let name: String
    let fitted: Fitted
    let mediaType: String
    let side: Int
    let budget: Int?
    /// Palette facts, for the PNGs.
    var colours: Int? = nil
    var palette: String? = nil
    var dither: Bool? = nil
}
