import VipsKit

extension PipelineStep {
    /// The square crop (centre or attention) resampled to `square.size`: square100's
    /// pixels, and the grid's when the sizes match.
    static let square = PipelineStep(name: "square") { snap in
        let image = try snap.required(snap.image, "the upright image")
        snap.square = try squarePixels(image, side: snap.settings.square.size, crop: snap.settings.square.crop)
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
