import SystemKit
internal import CJPEGShim
internal import CKernelShim
import Foundation

/// The square JPEG, encoded without a libvips pipeline (a budget search tries many qualities).
public enum JPEG {
    /// Chroma subsampling.
    public enum Chroma: String, Sendable, Codable, CaseIterable {
        /// Full-resolution chroma.
        case c444 = "444"
        /// Chroma halved in both directions.
        case c420 = "420"
    }

    /// A square's JPEG at any quality from one transform: the colour conversion and
    /// DCT are done once; at each quality tried, the coefficients are quantised, the
    /// optimal Huffman tables built and the file's size counted from the symbols
    /// without coding them; the file is written once.
    /// Baseline, optimised Huffman tables (one pair shared by the three components),
    /// one Robidoux quantisation table; the same bytes libjpeg writes from the same
    /// coefficients and tables (`writeWithLibjpeg`). Not for sharing between threads.
    public final class Plan {
        private let plan: OpaquePointer

        public init(rgb: [UInt8], width: Int, height: Int, chroma: Chroma = .c444) throws {
            precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
            var made: OpaquePointer?
            let status = rgb.withUnsafeBufferPointer {
                snap_jpeg_plan_new($0.baseAddress, Int32(width), Int32(height), chroma == .c420 ? 2 : 1, &made)
            }
            guard status == 0, let made else {
                throw VipsError(operation: "jpeg_plan", message: "cannot plan a JPEG of \(width)×\(height)")
            }
            plan = made
        }

        deinit { snap_jpeg_plan_free(plan) }

        /// The byte count of the file at `quality` (1–100): exact but for the 0x00
        /// bytes stuffed after each 0xFF byte of the entropy-coded data, which are
        /// estimated (one per 256 bytes; on the corpus squares the estimate is
        /// within 3 bytes, root mean square, of the written size).
        public func estimatedSize(quality: Int) -> Int { snap_jpeg_plan_estimate(plan, Int32(quality)) }

        /// The file at `quality`.
        public func write(quality: Int) throws -> [UInt8] {
            try take(operation: "jpeg_plan_write") { snap_jpeg_plan_write(plan, Int32(quality), &$0, &$1) }
        }

        /// The same file written by libjpeg (`jpeg_write_coefficients`) from the plan's
        /// coefficients and tables: the reference `write` is held to.
        public func writeWithLibjpeg(quality: Int) throws -> [UInt8] {
            try take(operation: "jpeg_write_coefficients") { snap_jpeg_plan_write_libjpeg(plan, Int32(quality), &$0, &$1) }
        }

        private func take(operation: String, _ body: (inout UnsafeMutablePointer<UInt8>?, inout Int) -> Int32) throws -> [UInt8] {
            var out: UnsafeMutablePointer<UInt8>?
            var length = 0
            guard body(&out, &length) == 0, let out else { throw VipsError(operation: operation, message: "out of memory") }
            defer { snap_free(out) }
            return Array(UnsafeBufferPointer(start: out, count: length))
        }
    }
}
