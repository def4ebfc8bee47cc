internal import CFaceShim

/// A face found in an image, in that image's pixels (x to the right, y down).
public struct FaceBox: Sendable, Equatable {
    public var x: Double, y: Double, width: Double, height: Double
    /// The detector's confidence, 0…1.
    public var score: Double

    public init(x: Double, y: Double, width: Double, height: Double, score: Double = 1) {
        self.x = x; self.y = y; self.width = width; self.height = height; self.score = score
    }

    public var area: Double { width * height }
    public var centreX: Double { x + width / 2 }
    public var centreY: Double { y + height / 2 }

    /// The same box in an image `factor` times as large.
    public func scaled(_ factor: Double) -> FaceBox {
        FaceBox(x: x * factor, y: y * factor, width: width * factor, height: height * factor, score: score)
    }
}

/// The face detector failed (the model did not load, or the network failed): a fault of
/// the build or the machine, never of the image.
public struct FaceDetectorError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// YuNet, a small convolutional face detector (MIT; model/README.md in CFaceShim), run by
/// OpenCV's dnn module on one thread. The model is built into the binary and loaded once per
/// thread, on first use. Deterministic: the same pixels give the same boxes on the same kind of
/// CPU (see `detect` for other kinds).
public enum FaceDetector {
    /// The short side of the copy the network looks at. At 144 px a snap's detection costs
    /// about 2.4 ms of CPU, no more than at 128 (the canvas of a 3:4 snap is 160×192 either way),
    /// and finds faces from about a tenth of the short side up (docs/pixel-art.md: Faces).
    public static let defaultInputShort = 144
    /// Boxes scoring below this are not faces: with it no false face on 72 photos without
    /// people (the corpus snaps and generated ones; docs/pixel-art.md: Faces).
    public static let defaultMinScore = 0.6

    /// Faces in packed 8-bit RGB, best first (at most `limit`).
    public static func detect(rgb: [UInt8], width: Int, height: Int, inputShort: Int = defaultInputShort,
                              minScore: Double = defaultMinScore, limit: Int = 16) throws -> [FaceBox] {
        precondition(rgb.count >= width * height * 3, "RGB buffer does not match its size")
        var boxes = [snap_face_box](repeating: snap_face_box(), count: max(1, limit))
        var error = [CChar](repeating: 0, count: 256)
        let count = rgb.withUnsafeBufferPointer { pixels in
            boxes.withUnsafeMutableBufferPointer { out in
                snap_faces_detect(pixels.baseAddress, Int32(width), Int32(height), Int32(inputShort), Float(minScore),
                                  out.baseAddress, Int32(limit), &error, Int32(error.count))
            }
        }
        guard count >= 0 else { throw FaceDetectorError(message: text(error)) }
        // Whole pixels: OpenCV picks its kernels by CPU (AVX2, AVX-512), and their sums may
        // differ in the last bits between machines; rounded, the boxes (and so the square and the
        // grid) differ only when an edge lies within that much of a half pixel.
        return boxes.prefix(Int(count)).map {
            FaceBox(x: Double($0.x).rounded(), y: Double($0.y).rounded(), width: Double($0.width).rounded(),
                    height: Double($0.height).rounded(), score: (Double($0.score) * 1000).rounded() / 1000)
        }
    }

    /// Loads the model on this thread now (the first `detect` does otherwise): for measuring
    /// the load apart from the detection.
    public static func prepare() throws {
        var error = [CChar](repeating: 0, count: 256)
        guard snap_faces_prepare(&error, Int32(error.count)) == 0 else { throw FaceDetectorError(message: text(error)) }
    }

    /// The OpenCV version the detector runs on.
    public static var openCVVersion: String { String(cString: snap_faces_opencv_version()) }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
