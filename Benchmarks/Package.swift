// swift-tools-version:6.1
import PackageDescription

// Stage benchmarks for SnapThumb (ordo-one/package-benchmark). A separate package so that the
// main package's build and tests never compile the benchmark tooling.
//
//   swift build --package-path Benchmarks                       (what CI does)
//   swift package --package-path Benchmarks benchmark           (run and print)
//   swift package --package-path Benchmarks benchmark thresholds check
let package = Package(
    name: "SnapThumbBenchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "SnapThumb", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "StageBenchmarks",
            dependencies: [
                .product(name: "SnapThumbCore", package: "SnapThumb"),
                .product(name: "SnapThumbStore", package: "SnapThumb"),
                // Face detection is a plugin opened on first use from beside the executable: built there.
                .product(name: "SnapThumbFaces", package: "SnapThumb"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StageBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
