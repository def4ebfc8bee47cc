// swift-tools-version:6.0
import PackageDescription
import Foundation

/// libexif has no call that returns its version: read it from its pkg-config file at build time
/// (`snapthumb version` reports it).
let libexifVersion: String = {
    let dirs = ["/usr/lib/x86_64-linux-gnu/pkgconfig", "/usr/lib/aarch64-linux-gnu/pkgconfig", "/usr/lib/pkgconfig",
                "/usr/local/lib/pkgconfig", "/usr/share/pkgconfig"]
    for dir in dirs {
        guard let text = try? String(contentsOfFile: dir + "/libexif.pc", encoding: .utf8) else { continue }
        for line in text.split(separator: "\n") where line.hasPrefix("Version:") {
            let version = line.dropFirst("Version:".count).trimmingCharacters(in: .whitespaces)
            if !version.isEmpty, version.allSatisfy({ $0.isNumber || $0 == "." }) { return version }
        }
    }
    return "unknown"
}()

let package = Package(
    name: "SnapThumb",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "snapthumb", targets: ["snapthumb"]),
        .library(name: "SnapThumbCore", targets: ["SnapThumbCore"]),
        .library(name: "SnapThumbRunner", targets: ["SnapThumbRunner"]),
        .library(name: "SnapThumbBench", targets: ["SnapThumbBench"]),
        .library(name: "SnapThumbVerify", targets: ["SnapThumbVerify"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The watch daemon: graceful shutdown on SIGTERM, metrics in Prometheus text format.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries from Debian (libvips-dev, libexif-dev; libimagequant-dev,
        // libjpeg62-turbo-dev and zlib come with libvips-dev; libssl-dev for SHA-256).
        // libvips' headers, but not the library: CSnapShim opens libvips.so.42 with
        // dlopen when an image first needs it, so that a process start does not load
        // its ~90 dependencies (about 24 ms each time). pkg-config's glib-2.0 gives
        // the include paths vips.h needs (and links GLib alone).
        .systemLibrary(name: "CVips", pkgConfig: "glib-2.0", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        // Fixed-argument wrappers for libvips' variadic calls and macros.
        .target(
            name: "CSnapShim",
            dependencies: ["CVips", "CExif"],
            cSettings: [.define("SNAP_LIBEXIF_VERSION", to: "\"\(libexifVersion)\"")],
            linkerSettings: [.linkedLibrary("imagequant"), .linkedLibrary("z"), .linkedLibrary("gomp"), .linkedLibrary("jpeg"), .linkedLibrary("crypto"), .linkedLibrary("dl")]
        ),
        // The one module with unsafe C interop (libvips, libexif, libjpeg, libimagequant,
        // zlib, and the POSIX calls that take raw buffers). Nothing above it sees a pointer.
        .target(name: "VipsKit", dependencies: ["CSnapShim"]),
        // Pipeline, byte budgets, store and manifest: safe Swift.
        .target(
            name: "SnapThumbCore",
            dependencies: ["VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        // The job runner: walks a tree, deals files to worker processes (or threads),
        // collects results and progress. Knows nothing of the watch layout.
        .target(
            name: "SnapThumbRunner",
            dependencies: ["SnapThumbCore", "VipsKit"]
        ),
        // `snapthumb verify`: re-hashes a store and validates every manifest against the
        // JSON Schema, which is a resource (the one copy; docs/ links to it).
        .target(
            name: "SnapThumbVerify",
            dependencies: ["SnapThumbCore", "SnapThumbRunner", "VipsKit"],
            resources: [.copy("Resources/manifest.v1.schema.json")]
        ),
        // `snapthumb bench`: the benchmark harness (SnapThumb beside vipsthumbnail and
        // Pillow on the same files, and the watch daemon's latency).
        .target(
            name: "SnapThumbBench",
            dependencies: ["SnapThumbCore", "SnapThumbRunner", "SnapThumbWatch", "VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        // Fault plans and helpers for tests; no production target depends on it.
        .target(
            name: "SnapThumbTesting",
            dependencies: ["SnapThumbCore", "SnapThumbRunner"]
        ),
        // The bucket store: S3-compatible object storage (AWS S3, Google Cloud
        // Storage's XML API, MinIO), signed with AWS Signature Version 4, over
        // Foundation's URLSession (see README, "Storing in a bucket").
        .target(
            name: "SnapThumbS3",
            dependencies: ["SnapThumbCore", "SnapThumbVerify", "VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        // Google Cloud: credentials found as Google's client libraries find them (a
        // service-account key's RS256 JWT, or the metadata server), Pub/Sub's REST API,
        // Cloud Storage's notifications. URLSession again; RS256 from OpenSSL via VipsKit.
        .target(
            name: "SnapThumbGoogle",
            dependencies: ["SnapThumbCore", "VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        // `snapthumb watch`: the watch-folder worker (claims, events, quarantine, metrics).
        .target(
            name: "SnapThumbWatch",
            dependencies: [
                "SnapThumbCore",
                "SnapThumbRunner",
                "VipsKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `snapthumb consume`: uploads announced on a message queue (S3 event notifications
        // through SQS) as one more job source of the runner. The queue protocol and the
        // event decoding know nothing of SQS; the SQS client signs with the bucket's SigV4.
        .target(
            name: "SnapThumbQueue",
            dependencies: [
                "SnapThumbCore",
                "SnapThumbGoogle",
                "SnapThumbRunner",
                "SnapThumbS3",
                "SnapThumbWatch",
                "VipsKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "snapthumb",
            dependencies: [
                "SnapThumbCore",
                "SnapThumbQueue",
                "SnapThumbRunner",
                "SnapThumbBench",
                "SnapThumbVerify",
                "SnapThumbWatch",
                "SnapThumbS3",
                "VipsKit",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Unit tests, plus command-line tests that run the built `snapthumb`.
        .testTarget(
            name: "SnapThumbCoreTests",
            dependencies: ["snapthumb", "SnapThumbCore", "SnapThumbRunner", "SnapThumbBench", "SnapThumbVerify", "SnapThumbTesting", "VipsKit"]
        ),
        // The signer against AWS's vectors; the bucket store against moto's S3 server on 127.0.0.1.
        .testTarget(
            name: "SnapThumbS3Tests",
            dependencies: ["snapthumb", "SnapThumbS3", "SnapThumbQueue", "SnapThumbGoogle", "SnapThumbCore", "SnapThumbRunner", "SnapThumbTesting", "VipsKit"],
            exclude: ["Fixtures"]
        ),
        // Credentials against a fake token endpoint and metadata server (Scripts/fake-google-auth.py),
        // the Pub/Sub client against Google's emulator when it is installed.
        .testTarget(
            name: "SnapThumbGoogleTests",
            dependencies: ["SnapThumbGoogle", "SnapThumbCore", "VipsKit", .product(name: "Logging", package: "swift-log")]
        ),
        // Integration tests: run the built `snapthumb watch` (the dependency makes `swift test` build it).
        .testTarget(
            name: "SnapThumbWatchTests",
            dependencies: ["snapthumb", "SnapThumbWatch", "SnapThumbCore", "SnapThumbRunner", "SnapThumbVerify", "SnapThumbTesting", "VipsKit",
                           .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                           .product(name: "Logging", package: "swift-log")]
        ),
    ]
)
