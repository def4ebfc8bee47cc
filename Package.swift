// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "SnapThumb",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "snapthumb", targets: ["snapthumb"]),
        .library(name: "SnapThumbCore", targets: ["SnapThumbCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // C libraries from Debian (libvips-dev, libexif-dev; libimagequant-dev,
        // libjpeg62-turbo-dev and zlib come with libvips-dev; libssl-dev for SHA-256).
        .systemLibrary(name: "CVips", pkgConfig: "vips", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        // Fixed-argument wrappers for libvips' variadic calls and macros.
        .target(
            name: "CSnapShim",
            dependencies: ["CVips", "CExif"],
            linkerSettings: [.linkedLibrary("imagequant"), .linkedLibrary("z"), .linkedLibrary("gomp"), .linkedLibrary("jpeg"), .linkedLibrary("crypto")]
        ),
        // The one module with unsafe C interop. Nothing above it sees a pointer.
        .target(name: "VipsKit", dependencies: ["CSnapShim"]),
        // Pipeline, byte budgets, store and manifest: safe Swift.
        .target(
            name: "SnapThumbCore",
            dependencies: ["VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "snapthumb",
            dependencies: [
                "SnapThumbCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "SnapThumbCoreTests",
            dependencies: ["SnapThumbCore", "VipsKit"]
        ),
    ]
)
