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

/// The package's folder: CFaceShim builds the face model's bytes into the binary from it.
let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().path

let package = Package(
    name: "SnapThumb",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "snapthumb", targets: ["snapthumb"]),
        .library(name: "SnapThumbCore", targets: ["SnapThumbCore"]),
        .library(name: "SnapThumbStore", targets: ["SnapThumbStore"]),
        .library(name: "SnapThumbRunner", targets: ["SnapThumbRunner"]),
        .library(name: "SnapThumbBench", targets: ["SnapThumbBench"]),
        .library(name: "SnapThumbVerify", targets: ["SnapThumbVerify"]),
        // The face plugin, libSnapThumbFaces.so: the face detector and OpenCV, opened with dlopen
        // (CFaceLoader) when a process first looks for faces, so that no other start loads OpenCV's
        // library tree (about 5.5 ms of CPU each). It goes beside the binary, or in <prefix>/lib/snapthumb.
        .library(name: "SnapThumbFaces", type: .dynamic, targets: ["CFaceShim"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The watch daemon: graceful shutdown on SIGTERM, metrics in Prometheus text format.
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The daemons' /healthz, /readyz and /metrics (`--listen`), on SwiftNIO
        // (docs/operations.md, "HTTP endpoints", says why this one).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // C libraries from Debian (libvips-dev, libexif-dev; libimagequant-dev,
        // libjpeg62-turbo-dev and zlib come with libvips-dev; libssl-dev for SHA-256).
        // libvips' headers, but not the library: CVipsShim opens libvips.so.42 with
        // dlopen when an image first needs it, so that a process start does not load
        // its ~90 dependencies (about 24 ms each time). pkg-config's glib-2.0 gives
        // the include paths vips.h needs (and links GLib alone).
        .systemLibrary(name: "CVips", pkgConfig: "glib-2.0", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        // The C under VipsKit, one target per concern and risk (issue 42):
        // pure kernels that call no library (resampling, OKLab), and what the others share;
        .target(name: "CKernelShim"),
        // the JPEG codec work over libjpeg-turbo, whose Huffman decoder and IDCTs read its
        // private structs (checked against the loaded version at run time);
        .target(name: "CJPEGShim", dependencies: ["CKernelShim"], linkerSettings: [.linkedLibrary("jpeg")]),
        // fixed-argument wrappers for libvips' variadic calls and macros, and libexif
        // (libvips' headers stay inside it: its public header does not export them);
        .target(
            name: "CVipsShim",
            dependencies: ["CVips", "CExif", "CKernelShim"],
            cSettings: [.define("SNAP_LIBEXIF_VERSION", to: "\"\(libexifVersion)\"")],
            linkerSettings: [.linkedLibrary("dl")]
        ),
        // the palette PNG's libraries: libimagequant and zlib.
        .target(name: "CCodecShim", linkerSettings: [.linkedLibrary("imagequant"), .linkedLibrary("z"), .linkedLibrary("gomp")]),
        // OpenSSL's digests and RS256, and the Linux calls Swift's Glibc lacks.
        .target(name: "CSystemShim", linkerSettings: [.linkedLibrary("crypto")]),
        // The face detector (YuNet over OpenCV's dnn, issue 38): C++ behind a small C API, apart
        // from the other C targets so that nothing else links OpenCV. Only the three OpenCV libraries it
        // needs; the model (model/, MIT) is built into the plugin with .incbin. No target depends on
        // it: it is the SnapThumbFaces product (a shared library) alone, which CFaceLoader opens.
        .target(
            name: "CFaceShim",
            exclude: ["model"],
            cxxSettings: [.define("SNAP_FACE_MODEL", to: "\"\(packageDirectory)/Sources/CFaceShim/model/face_detection_yunet.onnx\""),
                          .unsafeFlags(["-I/usr/include/opencv4"])],
            // The plugin is C++ alone: no Swift start-up object (swift_addNewDSOImage) and no Swift
            // runtime (-static-stdlib pulls nothing from the archives), so that it needs no
            // libswiftCore.so beside a binary built with --static-swift-stdlib.
            linkerSettings: [.linkedLibrary("opencv_dnn"), .linkedLibrary("opencv_imgproc"), .linkedLibrary("opencv_core"),
                             .unsafeFlags(["-nostartfiles", "-static-stdlib"])]
        ),
        // dlopen of the face plugin on first use, and its API as a table of C function pointers
        // (snap_face.h is read for compile-time checks only; nothing links CFaceShim).
        .target(name: "CFaceLoader", cSettings: [.headerSearchPath("../CFaceShim/include")], linkerSettings: [.linkedLibrary("dl")]),
        // ---- Layer 0: the only modules with unsafe C interop. Nothing above them sees a pointer.
        // The image libraries (libvips, libexif, libjpeg, libimagequant, zlib).
        .target(name: "VipsKit", dependencies: ["CVipsShim", "CJPEGShim", "CCodecShim", "CKernelShim", "SystemKit"]),
        // The system: POSIX files and processes, digests, RS256, sd_notify, and the
        // one lock-with-condition type (`Monitor`).
        .target(name: "SystemKit", dependencies: ["CSystemShim"]),
        // The one HTTP client (libcurl's easy interface, opened with dlopen on the first
        // request; blocking, cancellable or async) and retry policy, for the bucket store,
        // SQS and Google alike.
        .target(name: "CHTTPShim", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "HTTPKit", dependencies: ["CHTTPShim"]),
        // Faces in packed RGB (YuNet through CFaceShim): the detector's one Swift owner.
        .target(name: "FaceKit", dependencies: ["CFaceLoader"]),
        // Pixel-level algorithms and writers in safe Swift, knowing no pipeline: the
        // colour type, OKLab and its kernels' wrappers, the palette PNG writer, the HEIF colour box.
        .target(name: "PixelKit", dependencies: ["VipsKit", "SystemKit"]),
        // ---- Layer 1: the pipeline: steps, manifest, settings, errors. Knows no
        // store, runner, watch, bucket, verifier or bench.
        .target(
            name: "SnapThumbCore",
            dependencies: ["PixelKit", "FaceKit", "VipsKit", "SystemKit"]
        ),
        // ---- Layer 2: the store (StoreBackend, the directory store, the one commit
        // path, `StoreLocation`); the bucket store plugs in as a `StoreScheme`.
        .target(
            name: "SnapThumbStore",
            dependencies: ["SnapThumbConfig", "SnapThumbCore", "SystemKit", .product(name: "Logging", package: "swift-log")]
        ),
        // The bucket store: S3-compatible object storage (AWS S3, Google Cloud
        // Storage's XML API, MinIO, Ceph RGW), signed with AWS Signature Version 4,
        // over HTTPKit's libcurl transport (see README, "Storing in a bucket").
        .target(
            name: "SnapThumbS3",
            dependencies: ["SnapThumbStore", "SnapThumbConfig", "HTTPKit", "SnapThumbCore", "SystemKit", .product(name: "Logging", package: "swift-log")]
        ),
        // Google Cloud: credentials found as Google's client libraries find them (a
        // service-account key's RS256 JWT, or the metadata server), Pub/Sub's REST API,
        // Cloud Storage's notifications.
        .target(
            name: "SnapThumbGoogle",
            dependencies: ["SnapThumbConfig", "HTTPKit", "SnapThumbCore", "SystemKit", .product(name: "Logging", package: "swift-log")]
        ),
        // The one configuration layer: flags > environment > config file > defaults,
        // for every subcommand; the log format.
        .target(
            name: "SnapThumbConfig",
            dependencies: ["SnapThumbCore", .product(name: "Logging", package: "swift-log")]
        ),
        // ---- Layer 3: the one job runner: job sources, the supervisor of worker
        // processes, the worker's loop; and what daemons share (sd_notify, backoff).
        .target(
            name: "SnapThumbRunner",
            dependencies: ["SnapThumbStore", "SnapThumbConfig", "SnapThumbCore", "SystemKit", .product(name: "Logging", package: "swift-log"),
                           .product(name: "Prometheus", package: "swift-prometheus"), .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]
        ),
        // ---- Layer 4: what runs on the runner or reads a store.
        // `snapthumb verify`: re-hashes a store and validates every manifest against the
        // JSON Schema, which is a resource (the one copy; docs/ links to it).
        .target(
            name: "SnapThumbVerify",
            dependencies: ["SnapThumbStore", "SnapThumbS3", "SnapThumbCore", "SystemKit"],
            resources: [.copy("Resources/manifest.v1.schema.json")]
        ),
        // `snapthumb bench`: the benchmark harness (SnapThumb beside vipsthumbnail and
        // Pillow on the same files, and the watch daemon's latency, driven from outside).
        .target(
            name: "SnapThumbBench",
            dependencies: ["SnapThumbRunner", "SnapThumbStore", "SnapThumbConfig", "SnapThumbCore", "VipsKit", "SystemKit", .product(name: "Logging", package: "swift-log")]
        ),
        // `snapthumb watch`: the watch-folder worker (claims, events, quarantine, metrics).
        .target(
            name: "SnapThumbWatch",
            dependencies: [
                "SnapThumbRunner",
                "SnapThumbStore",
                "SnapThumbConfig",
                "SnapThumbCore",
                "SystemKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // `snapthumb consume`: uploads announced on a message queue (S3 event notifications
        // through SQS, Cloud Storage's through Pub/Sub) as one more job source of the runner.
        .target(
            name: "SnapThumbQueue",
            dependencies: [
                "SnapThumbRunner",
                "SnapThumbStore",
                "SnapThumbConfig",
                "SnapThumbS3",
                "SnapThumbGoogle",
                "HTTPKit",
                "SnapThumbCore",
                "SystemKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Fault plans and helpers for tests: fixtures, the CLI runner, the S3 servers the
        // bucket tests share (moto, Ceph RGW, the fault proxy); no production target depends on it.
        .target(
            name: "SnapThumbTesting",
            dependencies: ["SnapThumbRunner", "SnapThumbVerify", "SnapThumbS3", "SnapThumbConfig", "HTTPKit", "SnapThumbStore", "SnapThumbCore", "VipsKit", "SystemKit",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .executableTarget(
            name: "snapthumb",
            dependencies: [
                "SnapThumbCore",
                "SnapThumbConfig",
                "SnapThumbStore",
                "SnapThumbGoogle",
                "SnapThumbQueue",
                "SnapThumbRunner",
                "SnapThumbBench",
                "SnapThumbVerify",
                "SnapThumbWatch",
                "SnapThumbS3",
                "VipsKit",
                "SystemKit",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // ---- Tests: one target per library module, each through its module's API
        // (fixtures in SnapThumbTesting); only the CLI's links the executable and runs it
        // (Scripts/check-shape.py checks both).
        .testTarget(
            name: "SnapThumbCoreTests",
            dependencies: ["SnapThumbCore", "PixelKit", "SnapThumbStore", "SnapThumbTesting", "FaceKit", "VipsKit", "SystemKit"]
        ),
        .testTarget(
            name: "SnapThumbStoreTests",
            dependencies: ["SnapThumbStore", "SnapThumbVerify", "SnapThumbCore", "SnapThumbTesting", "VipsKit", "SystemKit"]
        ),
        // The runner tests' worker program: the runner's worker loop over a directory store,
        // from the runner's public API (so that those tests need not run `snapthumb`).
        .executableTarget(
            name: "runner-test-worker",
            dependencies: ["SnapThumbRunner", "SnapThumbStore", "SnapThumbCore", "SystemKit"],
            path: "Tests/RunnerTestWorker"
        ),
        .testTarget(
            name: "SnapThumbRunnerTests",
            dependencies: ["SnapThumbRunner", "SnapThumbStore", "SnapThumbVerify", "SnapThumbCore", "SnapThumbTesting", "SystemKit",
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                           .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle")]
        ),
        .testTarget(
            name: "SnapThumbVerifyTests",
            dependencies: ["SnapThumbVerify", "SnapThumbStore", "SnapThumbCore", "SnapThumbTesting", "VipsKit", "SystemKit"]
        ),
        // The signer against AWS's vectors; the bucket store against moto's S3 server and a
        // real Ceph RGW on 127.0.0.1; `consume`'s keys against S3Sources' listing.
        .testTarget(
            name: "SnapThumbS3Tests",
            dependencies: ["SnapThumbS3", "SnapThumbQueue", "SnapThumbGoogle", "SnapThumbStore", "SnapThumbConfig", "SnapThumbCore", "HTTPKit",
                           "SnapThumbRunner", "SnapThumbTesting", "SystemKit", "VipsKit"],
            exclude: ["Fixtures"]
        ),
        // SnapThumbQueue on its own, no server: bucket events, message-to-job mapping, outcome
        // classification and what the consumer does to each message, with a recording fake queue.
        .testTarget(
            name: "SnapThumbQueueTests",
            dependencies: ["SnapThumbQueue", "SnapThumbRunner", "SnapThumbGoogle", "SnapThumbStore", "SnapThumbConfig", "SnapThumbCore", "SnapThumbTesting",
                           "SystemKit", "VipsKit", .product(name: "Logging", package: "swift-log"),
                           .product(name: "Prometheus", package: "swift-prometheus")]
        ),
        // Credentials against a fake token endpoint and metadata server (Scripts/fake-google-auth.py),
        // the Pub/Sub client against Google's emulator when it is installed.
        .testTarget(
            name: "SnapThumbGoogleTests",
            dependencies: ["SnapThumbGoogle", "SnapThumbConfig", "HTTPKit", "SnapThumbCore", "SnapThumbTesting", "SystemKit", .product(name: "Logging", package: "swift-log")]
        ),
        // The watch daemon's configuration, backoff and liveness; its claims, quarantine and folder checks through their API.
        .testTarget(
            name: "SnapThumbWatchTests",
            dependencies: ["SnapThumbWatch", "SnapThumbRunner", "SnapThumbConfig", "SnapThumbStore", "SnapThumbCore", "SystemKit", "VipsKit",
                           .product(name: "Logging", package: "swift-log")]
        ),
        // The command line end to end: the one test target that links the executable
        // (the dependency makes `swift test` build it) and runs it: `snapthumb` against moto,
        // Ceph RGW, SQS and the Pub/Sub emulator (Bucket/, Queue/), `snapthumb watch` as a
        // daemon and the watch service with worker processes (Watch/).
        .testTarget(
            name: "SnapThumbCLITests",
            dependencies: ["snapthumb", "SnapThumbBench", "SnapThumbRunner", "SnapThumbVerify", "SnapThumbStore", "SnapThumbConfig",
                           "SnapThumbCore", "SnapThumbS3", "SnapThumbQueue", "SnapThumbGoogle", "SnapThumbWatch", "SnapThumbTesting",
                           "SystemKit", "VipsKit",
                           .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                           .product(name: "Logging", package: "swift-log")]
        ),
    ],
    cxxLanguageStandard: .cxx17
)
