import SystemKit
internal import CVipsShim
internal import CJPEGShim
internal import CCodecShim
internal import CKernelShim
import Foundation
import Synchronization

/// A libvips failure, with the message copied out of libvips' process-global
/// error buffer at the moment the call returned.
public struct VipsError: Error, Sendable, CustomStringConvertible {
    /// The wrapper that failed, e.g. `load` or `jpegsave`.
    public let operation: String
    /// libvips' own text, trimmed; may be empty.
    public let message: String

    public var description: String {
        message.isEmpty ? "\(operation) failed" : "\(operation): \(message)"
    }
}

/// Process-wide libvips set-up.
public enum Vips {
    private static let state = StartState()

    /// Starts libvips once; later calls are no-ops. Blocks every loader except
    /// JPEG, PNG, WebP, HEIF/AVIF and GIF, and turns the operation cache off.
    /// - Parameter threads: libvips worker threads per pipeline (parallelism
    ///   comes from running several images at once, not from inside libvips).
    public static func start(threads: Int = 1) throws {
        try state.start(threads: threads)
    }

    /// The libvips version, e.g. `8.14.1`.
    public static var version: String { String(cString: snap_vips_version()) }
    /// libimagequant's version, part of the recipe (it picks adaptive palettes).
    public static var imagequantVersion: String { String(cString: snap_liq_version()) }
    /// zlib's version, part of the recipe (it compresses the PNG variants).
    public static var zlibVersion: String { String(cString: snap_zlib_version()) }
    /// The libexif version SnapThumb was built against (libexif has no call that says).
    public static var exifVersion: String { String(cString: snap_exif_version()) }
    /// libjpeg-turbo's version (it decodes and encodes the JPEGs).
    public static var jpegVersion: String { String(cString: snap_jpeg_version()) }
    /// The libjpeg-turbo loaded at run time ("" when it does not say).
    public static var jpegRuntimeVersion: String { String(cString: snap_jpeg_runtime_version()) }
    /// Whether SnapThumb's Huffman decoder and paired IDCTs run: they read libjpeg-turbo's
    /// private structs, so only on a version they were tested against, loaded as built.
    public static var ownJPEGDecoding: Bool { snap_jpeg_internals_ok() != 0 }
    /// A sentence when they do not run (libjpeg's own decoding then: the same pixels, more CPU).
    public static var jpegDecodingNote: String? {
        if ownJPEGDecoding { return nil }
        let loaded = jpegRuntimeVersion.isEmpty ? "a libjpeg that does not name its libjpeg-turbo version" : "libjpeg-turbo \(jpegRuntimeVersion)"
        return "JPEG decoding uses libjpeg's own decoder: \(loaded) is loaded, SnapThumb was built against \(jpegVersion), and its own decoder reads libjpeg-turbo's internals only on versions it was tested against (same pixels, more CPU)"
    }

    /// Print libvips/GLib warnings to stderr (they are counted and dropped otherwise,
    /// because in a shared process they cannot be tied to one image).
    public static func setWarningsVerbose(_ on: Bool) { snap_set_warnings_verbose(on ? 1 : 0) }
    /// How many libvips/GLib warnings the process has seen.
    public static var warningCount: UInt { UInt(snap_warning_count()) }

    /// Copies and clears libvips' error buffer in one step.
    static func takeError(_ operation: String) -> VipsError {
        guard let raw = snap_error_take() else { return VipsError(operation: operation, message: "") }
        defer { snap_free(raw) }
        let text = String(cString: raw)
            .split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        // Keep the messages in order but drop repeats (libvips often reports one cause twice).
        var seen = Set<String>()
        let unique = text.filter { seen.insert($0).inserted }
        return VipsError(operation: operation, message: unique.joined(separator: "; "))
    }

    /// Clears whatever earlier calls (or successful decodes of damaged files) left behind.
    static func clearError() {
        if let raw = snap_error_take() { snap_free(raw) }
    }
}

private final class StartState: Sendable {
    private let started = Mutex(false)

    func start(threads: Int) throws {
        try started.withLock { started in
            if started { return }
            if snap_init(CommandLine.arguments.first ?? "snapthumb", Int32(threads)) != 0 {
                throw Vips.takeError("vips_init")
            }
            started = true
        }
    }
}
