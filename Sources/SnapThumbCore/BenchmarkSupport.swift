import Foundation
import VipsKit
import SystemKit
import FaceKit

/// The pipeline's steps in groups, for the stage benchmarks in `Benchmarks/`
/// (`@_spi(Benchmarks) import SnapThumbCore`): the same `Pipeline.steps` the
/// pipeline runs, cut where a stage ends. Not API: it may change with the steps.
@_spi(Benchmarks) public enum BenchmarkSupport {
    /// Decode, colour, orient and square: the square crop that square100 and the
    /// pixel-art grid are made from, as packed RGB.
    public static func decodeSquare(_ bytes: [UInt8], settings: Settings = Settings()) throws -> [UInt8] {
        var snap = Snap(source: SourceBuffer(bytes), settings: settings)
        try Pipeline.run(stage(through: "square"), on: &snap)
        return snap.square
    }

    /// The square100 JPEG within its budget, from `decodeSquare`'s pixels.
    /// Returns the JPEG's size and how many encodes the search took.
    public static func budgetSearch(square rgb: [UInt8], settings: Settings = Settings()) throws -> (bytes: Int, encodes: Int) {
        var snap = Snap(source: SourceBuffer([]), settings: settings)
        snap.square = rgb
        try Pipeline.run(stage(["encode within budget"]), on: &snap)
        let fitted = try snap.required(snap.encoded.first, "square100").fitted
        return (fitted.bytes.count, fitted.encodes)
    }

    /// Grid and pixel art (both PNGs within budget) from `decodeSquare`'s pixels
    /// (square size 4 × grid). Returns their total bytes.
    public static func pixelArt(square rgb: [UInt8], settings: Settings = Settings()) throws -> Int {
        var snap = Snap(source: SourceBuffer([]), settings: settings)
        snap.square = rgb
        try Pipeline.run(stage(["grid", "pixel art"]), on: &snap)
        return snap.encoded.reduce(0) { $0 + $1.fitted.bytes.count }
    }

    /// The faces step's CPU time in ms on this thread (decode, colour and orient first, not
    /// counted): `bench`'s faces stage. The first call on a thread also loads the model; call
    /// `loadFaceModel` first to keep that apart.
    public static func facesStageMilliseconds(_ source: SourceBuffer, settings: Settings = Settings()) throws -> Double {
        var snap = Snap(source: source, settings: settings)
        try Pipeline.run(stage(through: "orient"), on: &snap)
        let start = threadCPUMilliseconds()
        try Pipeline.run(stage(["faces"]), on: &snap)
        return threadCPUMilliseconds() - start
    }

    /// Loads the face model on this thread; its CPU time in ms.
    public static func loadFaceModel() throws -> Double {
        let start = threadCPUMilliseconds()
        try FaceDetector.prepare()
        return threadCPUMilliseconds() - start
    }

    static func threadCPUMilliseconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) * 1000 + Double(t.tv_nsec) / 1e6
    }

    /// The whole pipeline on encoded bytes, nothing stored.
    public static func process(_ pipeline: Pipeline, _ bytes: [UInt8], key: String) throws -> ProcessedUpload {
        try pipeline.process(SourceBuffer(bytes), key: key)
    }

    /// The manifest's canonical JSON, as written to the store.
    public static func manifestJSON(_ upload: ProcessedUpload) -> Data { upload.manifest.json() }

    /// The named steps of `Pipeline.steps`, in the pipeline's order.
    static func stage(_ names: [String]) -> [PipelineStep] {
        Pipeline.steps.filter { names.contains($0.name) }
    }

    /// `Pipeline.steps` from the first through the one named `last`.
    static func stage(through last: String) -> [PipelineStep] {
        guard let end = Pipeline.steps.firstIndex(where: { $0.name == last }) else { return [] }
        return Array(Pipeline.steps[...end])
    }
}
