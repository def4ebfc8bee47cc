import VipsKit
import SystemKit

extension PipelineStep {
    /// The square crop (around the faces, else centre or attention) resampled to
    /// `square.size`: square100's pixels, and the grid's when the sizes match.
    static let square = PipelineStep(name: "square") { snap in
        snap.square = try squarePixels(snap, side: snap.settings.square.size)
    }
}

/// The snap's square at `side` pixels: where the faces step placed it, else by `square.crop`.
func squarePixels(_ snap: Snap, side: Int) throws -> [UInt8] {
    let image = try snap.required(snap.image, "the upright image")
    if let placed = snap.placement, case .rgb(let packed) = image { return try placedSquare(packed, at: placed, side: side) }
    return try squarePixels(image, side: side, crop: snap.settings.square.crop, onImage: snap.onImage)
}

/// The square crop as packed RGB. The centre crop is resampled here: libvips'
/// thumbnail of a 135×180 image in memory cost 1.6 ms of CPU, most of it setting
/// up its pipeline, against about 0.2 ms. `attention` needs libvips' interest measure.
///
/// libvips' crops look only at the centre window of at most `maxCropAspect`:1
/// (`cropWindow`): a thumbnail scales the short side to `side` before it crops,
/// and `attention` measures every pixel of that, so a 65000×1 strip cost 42 s and
/// 2.5 GB. The window bounds that at `side` × `maxCropAspect · side` pixels; a
/// centre crop is the same with or without it.
func squarePixels(_ image: WorkingImage, side: Int, crop: CropMode, onImage: (any Killable) -> Void = { _ in }) throws -> [UInt8] {
    switch image {
    case .rgb(let packed) where crop == .centre:
        return try Resample.squareCentre(rgb: packed.pixels, region: packed.region, fullWidth: packed.width,
                                         fullHeight: packed.height, side: side)
    case .vips(let image) where crop == .centre && image.bands == 3 && image.isUChar:
        return try Resample.squareCentre(rgb: image.pixels(), width: image.width, height: image.height, side: side)
    default:
        var source = try image.vipsImage()
        let window = cropWindow(width: source.width, height: source.height)
        if window.width != source.width || window.height != source.height {
            source = try source.extractArea(left: window.left, top: window.top, width: window.width, height: window.height)
        }
        let thumbnail = try source.thumbnail(width: side, height: side, crop: crop)
        // Under the per-image time limit like the decode.
        onImage(thumbnail)
        return try thumbnail.pixels()
    }
}

/// The widest aspect ratio a crop looks at (see `squarePixels`).
let maxCropAspect = 8

/// The centre part of a `width`×`height` image that the square crop looks at: the
/// whole image up to `maxCropAspect`:1, else the centre window of that ratio.
func cropWindow(width: Int, height: Int) -> (left: Int, top: Int, width: Int, height: Int) {
    let short = max(1, min(width, height))
    let longest = short * maxCropAspect
    if width > longest { return ((width - longest) / 2, 0, longest, height) }
    if height > longest { return (0, (height - longest) / 2, width, longest) }
    return (0, 0, width, height)
}
