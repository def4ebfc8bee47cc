import VipsKit
import SystemKit

extension PipelineStep {
    /// Turns the image upright by its EXIF orientation, once (HEIF's own transforms
    /// were applied by libheif while decoding: its header says 1).
    static let orient = PipelineStep(name: "orient") { snap in
        let fix = OrientationFix(exif: try snap.required(snap.header, "the header").orientation)
        switch try snap.required(snap.image, "the decoded image") {
        case .rgb(let packed):
            snap.image = .rgb(fix.apply(to: packed))
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

    /// The decoded part turned upright, and where it now lies in the upright whole.
    func apply(to packed: PackedRGB) -> PackedRGB {
        let r = packed.region
        let upright = Resample.oriented(rgb: packed.pixels, width: r.width, height: r.height, rotate: rotate, flip: flip)
        // Where stored pixel (x, y) of the whole W×H image shows: rotated clockwise, then mirrored.
        let w = packed.width, h = packed.height
        let ow = swapsAxes ? h : w, oh = swapsAxes ? w : h
        func place(_ x: Int, _ y: Int) -> (Int, Int) {
            var p: (Int, Int)
            switch rotate {
            case 90: p = (h - 1 - y, x)
            case 180: p = (w - 1 - x, h - 1 - y)
            case 270: p = (y, w - 1 - x)
            default: p = (x, y)
            }
            if flip { p.0 = ow - 1 - p.0 }
            return p
        }
        let a = place(r.left, r.top), b = place(r.left + r.width - 1, r.top + r.height - 1)
        let region = PixelRegion(left: min(a.0, b.0), top: min(a.1, b.1), width: upright.width, height: upright.height)
        return PackedRGB(pixels: upright.pixels, region: region, width: ow, height: oh)
    }

    func apply(to image: VImage) throws -> VImage {
        var out = image
        if rotate != 0 { out = try out.rotated(rotate) }
        if flip { out = try out.flippedHorizontally() }
        return out
    }
}

/// Normalises a raw EXIF orientation: values outside 1–8 (absent, 0, nonsense) are 1.
func normalisedOrientation(_ raw: Int) -> Int { (1...8).contains(raw) ? raw : 1 }
