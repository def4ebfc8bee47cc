internal import CFaceLoader

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

/// The face detector failed (the plugin or the model did not load, or the network failed): a
/// fault of the build, the install or the machine, never of the image.
public struct FaceDetectorError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// YuNet, a small convolutional face detector (MIT; model/README.md in CFaceShim), run by
/// OpenCV's dnn module on one thread. It lives in the face plugin (`FacePlugin`), a shared
/// library opened on the first detection; the model is built into it and loaded once per
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

    /// Faces in packed 8-bit RGB, best first (at most `limit`). Opens the face plugin on the
    /// first call in the process; a missing plugin throws.
    public static func detect(rgb: [UInt8], width: Int, height: Int, inputShort: Int = defaultInputShort,
                              minScore: Double = defaultMinScore, limit: Int = 16) throws -> [FaceBox] {
        precondition(rgb.count >= width * height * 3, "RGB buffer does not match its size")
        let plugin = try FacePlugin.table()
        var boxes = [snap_face_plugin_box](repeating: snap_face_plugin_box(), count: max(1, limit))
        var error = [CChar](repeating: 0, count: 256)
        let count = rgb.withUnsafeBufferPointer { pixels in
            boxes.withUnsafeMutableBufferPointer { out in
                plugin.detect(pixels.baseAddress, Int32(width), Int32(height), Int32(inputShort), Float(minScore),
                              out.baseAddress, Int32(limit), &error, Int32(error.count))
            }
        }
        guard count >= 0 else { throw FaceDetectorError(message: FacePlugin.text(error)) }
        // Whole pixels: OpenCV picks its kernels by CPU (AVX2, AVX-512), and their sums may
        // differ in the last bits between machines; rounded, the boxes (and so the square and the
        // grid) differ only when an edge lies within that much of a half pixel.
        return boxes.prefix(Int(count)).map {
            FaceBox(x: Double($0.x).rounded(), y: Double($0.y).rounded(), width: Double($0.width).rounded(),
                    height: Double($0.height).rounded(), score: (Double($0.score) * 1000).rounded() / 1000)
        }
    }

    /// Loads the plugin and the model on this thread now (the first `detect` does otherwise):
    /// for measuring the load apart from the detection.
    public static func prepare() throws {
        let plugin = try FacePlugin.table()
        var error = [CChar](repeating: 0, count: 256)
        guard plugin.prepare(&error, Int32(error.count)) == 0 else { throw FaceDetectorError(message: FacePlugin.text(error)) }
    }

    /// The OpenCV version the detector runs on (opens the plugin).
    public static var openCVVersion: String {
        get throws { try FacePlugin.table().opencv_version().map { String(cString: $0) } ?? "" }
    }
}

/// The face plugin, libSnapThumbFaces.so: CFaceShim and the OpenCV libraries it links, opened
/// with dlopen on the first detection (CFaceLoader), so that a process that looks for no faces
/// never pays OpenCV's load (its library tree and static constructors, about 7.5 ms of each
/// start). Looked for beside the executable, then in `../lib/snapthumb/` from it (an install).
public enum FacePlugin {
    /// The plugin's file name.
    public static let fileName = SNAP_FACE_PLUGIN_NAME

    /// Where the plugin is, without loading it; nil when it is missing.
    public static var path: String? {
        var buffer = [CChar](repeating: 0, count: 8192)
        return snap_face_plugin_find(&buffer, Int32(buffer.count)) == 1 ? text(buffer) : nil
    }

    /// Throws, saying every place looked at, when the plugin is missing (nothing is loaded).
    public static func requirePresent() throws {
        var buffer = [CChar](repeating: 0, count: 8192)
        guard snap_face_plugin_find(&buffer, Int32(buffer.count)) == 1 else { throw FaceDetectorError(message: text(buffer)) }
    }

    /// Whether this process has opened the plugin (and so OpenCV).
    public static var isLoaded: Bool { snap_face_plugin_loaded() == 1 }

    /// The plugin's functions (CFaceShim's snap_face.h), opened on the first call.
    struct Table {
        let detect: @convention(c) (UnsafePointer<UInt8>?, Int32, Int32, Int32, Float, UnsafeMutablePointer<snap_face_plugin_box>?,
                                    Int32, UnsafeMutablePointer<CChar>?, Int32) -> Int32
        let prepare: @convention(c) (UnsafeMutablePointer<CChar>?, Int32) -> Int32
        let opencv_version: @convention(c) () -> UnsafePointer<CChar>?
    }

    static func table() throws -> Table {
        var error = [CChar](repeating: 0, count: 8192)
        guard let loaded = snap_face_plugin_load(&error, Int32(error.count)),
              let detect = loaded.pointee.detect, let prepare = loaded.pointee.prepare, let version = loaded.pointee.opencv_version
        else { throw FaceDetectorError(message: text(error)) }
        return Table(detect: detect, prepare: prepare, opencv_version: version)
    }

    static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
