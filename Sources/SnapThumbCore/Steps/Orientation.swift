import VipsKit

extension PipelineStep {
    /// Turns the image upright by its EXIF orientation, once (HEIF's own transforms
    /// were applied by libheif while decoding: its header says 1).
    static let orient = PipelineStep(name: "orient") { snap in
        let fix = OrientationFix(exif: try snap.required(snap.header, "the header").orientation)
        switch try snap.required(snap.image, "the decoded image") {
        case .rgb(let pixels, let width, let height):
            let upright = Resample.oriented(rgb: pixels, width: width, height: height, rotate: fix.rotate, flip: fix.flip)
            snap.image = .rgb(pixels: upright.pixels, width: upright.width, height: upright.height)
        case .vips(let image):
            do {
                snap.image = .vips(try fix.apply(to: image))
            } catch let error as VipsError {
                throw SnapError(.corrupt, "cannot convert the colours of this image: \(error.message)", cause: error.description)
            }
        }
    }
}

/// What it takes to display stored pixels upright for an EXIF orientation:
/// rotate clockwise, then (optionally) mirror left–right.
public struct OrientationFix: Equatable, Sendable {
    public let rotate: Int
    public let flip: Bool

    /// The fix for EXIF orientation `value`; anything outside 1–8 counts as 1.
    public init(exif value: Int) {
        switch value {
        case 2: (rotate, flip) = (0, true)
        case 3: (rotate, flip) = (180, false)
        case 4: (rotate, flip) = (180, true)
        case 5: (rotate, flip) = (90, true)
        case 6: (rotate, flip) = (90, false)
        case 7: (rotate, flip) = (270, true)
        case 8: (rotate, flip) = (270, false)
        default: (rotate, flip) = (0, false)
        }
    }

    /// True when the fix swaps width and height.
    public var swapsAxes: Bool { rotate == 90 || rotate == 270 }

    func apply(to image: VImage) throws -> VImage {
        var out = image
        if rotate != 0 { out = try out.rotated(rotate) }
        if flip { out = try out.flippedHorizontally() }
        return out
    }
}

/// Normalises a raw EXIF orientation: values outside 1–8 (absent, 0, nonsense) are 1.
func normalisedOrientation(_ raw: Int) -> Int { (1...8).contains(raw) ? raw : 1 }
