import VipsKit
import FaceKit

extension PipelineStep {
    /// Faces first (issue 38): YuNet looks for faces in the upright decoded image, and the
    /// square is placed to keep them (`FaceSquare`); without faces (or with `square.faces`
    /// off) `square.crop` decides as before. Fills `placement`, `faces` and `crop`.
    static let faces = PipelineStep(name: "faces") { snap in
        let header = try snap.required(snap.header, "the header")
        var image = try snap.required(snap.image, "the upright image")
        let detect = snap.settings.square.faces
        if detect, let packed = try wholeRGB(&image) {
            do {
                snap.faces = try FaceDetector.detect(rgb: packed.pixels, width: packed.width, height: packed.height)
            } catch let error as FaceDetectorError {
                throw SnapError(.internal, "the face detector failed: \(error.message)")
            }
            snap.image = image
        }
        // The crop's rectangle in the upright original's pixels.
        let (fullWidth, fullHeight) = header.upright
        let (width, height) = image.size
        let scale = Double(fullWidth) / Double(max(1, width)), fullSide = min(fullWidth, fullHeight)
        let found = detect ? snap.faces.count : nil
        if let placed = FaceSquare.place(faces: snap.faces, width: width, height: height) {
            snap.placement = placed
            func original(_ v: Int) -> Int { Int((Double(v) * scale).rounded()) }
            let left = min(original(placed.left), fullWidth - fullSide), top = min(original(placed.top), fullHeight - fullSide)
            snap.crop = CropInfo(source: .faces, left: left, top: top, width: fullSide, height: fullSide, faces: found)
        } else if snap.settings.square.crop == .centre {
            snap.crop = CropInfo(source: .centre, left: (fullWidth - fullSide) / 2, top: (fullHeight - fullSide) / 2,
                                 width: fullSide, height: fullSide, faces: found)
        } else {
            snap.crop = CropInfo(source: .attention, faces: found)
        }
    }

    /// The upright image as whole packed RGB for the detector, or nil when it is not 8-bit RGB.
    /// A libvips image is copied out once and kept so: the square reads the same pixels.
    static func wholeRGB(_ image: inout WorkingImage) throws -> PackedRGB? {
        switch image {
        case .rgb(let packed) where packed.isWhole: return packed
        case .vips(let v) where v.bands == 3 && v.isUChar:
            let packed = PackedRGB(pixels: try v.pixels(), width: v.width, height: v.height)
            image = .rgb(packed)
            return packed
        default: return nil
        }
    }
}

extension WorkingImage {
    /// Width and height of the whole upright image.
    var size: (Int, Int) {
        switch self {
        case .rgb(let packed): return (packed.width, packed.height)
        case .vips(let image): return (image.width, image.height)
        }
    }
}
