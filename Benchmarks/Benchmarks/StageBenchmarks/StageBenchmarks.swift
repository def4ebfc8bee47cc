import Benchmark
import Foundation
@_spi(Benchmarks) import SnapThumbCore
@_spi(Benchmarks) import SnapThumbStore

// One benchmark per pipeline stage, on a bundled sample snap: decode + square crop,
// budget search, pixel art, sha256 + durable store write, manifest JSON, and the
// whole pipeline without the store. Names have no spaces: package-benchmark 1.38.1
// writes threshold files with spaces replaced but looks them up without. Thresholds are kept
// on the stable metrics (instructions, allocations); wall and CPU time are printed
// for people but never checked: the machines that run this are shared.

/// `Samples/snaps/<name>` of the main package.
private func sample(_ name: String) -> [UInt8] {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    let path = root.appendingPathComponent("Samples/snaps/\(name)").path
    guard let data = FileManager.default.contents(atPath: path) else { fatalError("cannot read \(path)") }
    return [UInt8](data)
}

private func temporaryStore() throws -> Store {
    try Store(root: NSTemporaryDirectory() + "snapthumb-stage-bench-\(UUID().uuidString)")
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.instructions, .mallocCountTotal, .cpuTotal, .wallClock],
        warmupIterations: 3,
        maxDuration: .seconds(1),
        maxIterations: 200,
        thresholds: [
            .instructions: .init(relative: [.p50: 5.0, .p90: 10.0]),
            .mallocCountTotal: .init(relative: [.p50: 5.0, .p90: 10.0]),
        ])

    let settings = Settings()
    let photo = sample("phone-portrait.jpg")
    let pipeline = try! Pipeline(settings: settings)
    let square = try! BenchmarkSupport.decodeSquare(photo, settings: settings)
    let upload = try! BenchmarkSupport.process(pipeline, photo, key: "phone-portrait.jpg")

    Benchmark("DecodeSquare100") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try BenchmarkSupport.decodeSquare(photo, settings: settings)) }
    }

    Benchmark("BudgetSearch") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try BenchmarkSupport.budgetSearch(square: square, settings: settings)) }
    }

    Benchmark("PixelArt") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try BenchmarkSupport.pixelArt(square: square, settings: settings)) }
    }

    Benchmark("HashAndStore") { benchmark in
        let store = try temporaryStore()
        defer { try? FileManager.default.removeItem(atPath: store.root) }
        for i in benchmark.scaledIterations { try StoreBenchmarkSupport.hashAndStore(upload, salt: i, store: store) }
    }

    Benchmark("ManifestJSON") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(BenchmarkSupport.manifestJSON(upload)) }
    }

    Benchmark("WholePipeline") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try BenchmarkSupport.process(pipeline, photo, key: "phone-portrait.jpg")) }
    }
}
