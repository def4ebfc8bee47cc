import VipsKit
import SystemKit

extension PipelineStep {
    /// The square crop (around the faces, else centre or attention) resampled to
    /// `square.size`: square100's pixels, and the grid's when the sizes match.
    static let square = PipelineStep(name: "square") { snap in
        var attentionAt: (left: Int, top: Int)?
        snap.square = try squarePixels(snap, side: snap.settings.square.size, attentionAt: &attentionAt)
        // Where libvips' attention cut, in the upright original's pixels, for the manifest.
        if let at = attentionAt, var crop = snap.crop, crop.source == .attention, let header = snap.header, let image = snap.image {
            let (fullWidth, fullHeight) = header.upright
            let scale = Double(fullWidth) / Double(max(1, image.size.0)), side = min(fullWidth, fullHeight)
            crop.left = min(fullWidth - side, Int((Double(at.left) * scale).rounded()))
            crop.top = min(fullHeight - side, Int((Double(at.top) * scale).rounded()))
            (crop.width, crop.height) = (side, side)
            snap.crop = crop
        }
    }
}

/// The snap's square at `side` pixels: where the faces step placed it, else by `square.crop`.
func squarePixels(_ snap: Snap, side: Int) throws -> [UInt8] {
    var ignored: (left: Int, top: Int)?
    return try squarePixels(snap, side: side, attentionAt: &ignored)
}

func squarePixels(_ snap: Snap, side: Int, attentionAt: inout (left: Int, top: Int)?) throws -> [UInt8] {
    let image = try snap.required(snap.image, "the upright image")
    if let p = snap.placement, case .rgb(let packed) = image {
        return try Resample.square(rgb: packed.pixels, width: packed.width, left: p.left, top: p.top, cut: p.side, side: side)
    }
    return try squarePixels(image, side: side, crop: snap.settings.square.crop, onImage: snap.onImage, attentionAt: &attentionAt)
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
/// `attentionAt` receives the top-left corner of libvips' crop in `image`'s pixels (its
/// thumbnail says where it cut in `xoffset`/`yoffset`, negated, in the scaled image).
func squarePixels(_ image: WorkingImage, side: Int, crop: CropMode, onImage: (any Killable) -> Void = { _ in }) throws -> [UInt8] {
    var ignored: (left: Int, top: Int)?
    return try squarePixels(image, side: side, crop: crop, onImage: onImage, attentionAt: &ignored)
}

func squarePixels(_ image: WorkingImage, side: Int, crop: CropMode, onImage: (any Killable) -> Void = { _ in },
                  attentionAt: inout (left: Int, top: Int)?) throws -> [UInt8] {
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
        let scale = Double(min(window.width, window.height)) / Double(side)
        attentionAt = (window.left + Int((Double(-(thumbnail.int("xoffset") ?? 0)) * scale).rounded()),
                       window.top + Int((Double(-(thumbnail.int("yoffset") ?? 0)) * scale).rounded()))
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
