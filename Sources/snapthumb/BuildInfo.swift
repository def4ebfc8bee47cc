import Foundation
import SnapThumbCore
import VipsKit

/// How this binary was built, for `snapthumb version`.
extension SnapThumbVersion {
    /// The Swift compiler that built this binary.
    public static var swiftVersion: String {
        #if compiler(>=6.5)
        return "6.5 or later"
        #elseif compiler(>=6.4)
        return "6.4"
        #elseif compiler(>=6.3.1)
        return "6.3.1"
        #elseif compiler(>=6.3)
        return "6.3"
        #elseif compiler(>=6.2)
        return "6.2"
        #elseif compiler(>=6.1)
        return "6.1"
        #else
        return "6.0"
        #endif
    }

    /// `debug` or `release` (SwiftPM defines DEBUG in debug builds).
    public static var buildConfiguration: String {
        #if DEBUG
        return "debug"
        #else
        return "release"
        #endif
    }

    /// The target triple this binary was compiled for, e.g. `x86_64-unknown-linux-gnu`.
    public static var targetTriple: String {
        #if arch(x86_64)
        let arch = "x86_64"
        #elseif arch(arm64)
        let arch = "aarch64"
        #else
        let arch = "unknown"
        #endif
        #if os(Linux)
        #if canImport(Musl)
        return arch + "-unknown-linux-musl"
        #else
        return arch + "-unknown-linux-gnu"
        #endif
        #elseif os(macOS)
        return arch + "-apple-macosx"
        #else
        return arch + "-unknown"
        #endif
    }

    /// Everything `snapthumb version --json` prints. Library versions are the ones SnapThumb
    /// was built against (libvips is opened on first use and must match; see README).
    public struct Info: Codable, Sendable, Equatable {
        public var name = "snapthumb"
        public var version = SnapThumbVersion.current
        public var manifestSchema = Manifest.schemaName
        public var pipelineVersion = Recipe.pipelineVersion
        public var libraries: Libraries
        public var jpegDecoding: JPEGDecoding
        public var facePlugin: FacePlugin
        public var build: Build

        /// The face plugin (libSnapThumbFaces.so, face detection and OpenCV), looked for but not
        /// loaded: it is opened on the first detection.
        public struct FacePlugin: Codable, Sendable, Equatable {
            public var present: Bool
            /// Where it was found (absent when it is not).
            public var path: String?
        }

        /// Whose JPEG decoding runs: SnapThumb's Huffman decoder and paired IDCTs read
        /// libjpeg-turbo's private structs, so they run only on a tested version, loaded as built.
        public struct JPEGDecoding: Codable, Sendable, Equatable {
            /// The libjpeg-turbo loaded now ("" when it does not say).
            public var libjpegLoaded: String
            /// True: SnapThumb's own decoder; false: libjpeg's own (`note` says why).
            public var ownDecoder: Bool
            public var note: String?
        }

        public struct Libraries: Codable, Sendable, Equatable {
            public var libvips: String
            public var libexif: String
            public var libimagequant: String
            public var libjpeg: String
            public var zlib: String
        }

        public struct Build: Codable, Sendable, Equatable {
            public var swift: String
            public var configuration: String
            public var target: String
        }
    }

    public static var info: Info {
        Info(
            libraries: .init(libvips: Vips.version, libexif: Vips.exifVersion, libimagequant: Vips.imagequantVersion,
                             libjpeg: Vips.jpegVersion, zlib: Vips.zlibVersion),
            jpegDecoding: .init(libjpegLoaded: Vips.jpegRuntimeVersion, ownDecoder: Vips.ownJPEGDecoding, note: Vips.jpegDecodingNote),
            facePlugin: .init(present: FaceSupport.pluginPath != nil, path: FaceSupport.pluginPath),
            build: .init(swift: swiftVersion, configuration: buildConfiguration, target: targetTriple))
    }
}
