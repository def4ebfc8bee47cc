import SystemKit
internal import CKernelShim
import Foundation

/// Resampling small images without a libvips pipeline.
public enum Resample {
    /// The exact centre `side`×`side` square of packed 8-bit RGB, scaled to fill
    /// (Lanczos3): `VImage.thumbnail(… crop: .centre)` without its rounding of the
    /// crop to whole pixels, for a fraction of its cost on the ~270×360 images
    /// SnapThumb decodes snaps to.
    public static func squareCentre(rgb: [UInt8], width: Int, height: Int, side: Int) throws -> [UInt8] {
        try squareCentre(rgb: rgb, region: PixelRegion(left: 0, top: 0, width: width, height: height),
                         fullWidth: width, fullHeight: height, side: side)
    }

    /// The same square of a `fullWidth`×`fullHeight` image of which `rgb` holds only
    /// `region` (enough around the centre for every tap; otherwise an error).
    public static func squareCentre(rgb: [UInt8], region: PixelRegion, fullWidth: Int, fullHeight: Int, side: Int) throws -> [UInt8] {
        precondition(rgb.count == region.width * region.height * 3, "RGB buffer does not match its size")
        var out = [UInt8](repeating: 0, count: side * side * 3)
        let status = rgb.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer {
                snap_square_rgb_region(input.baseAddress, Int32(region.width), Int32(region.height), Int32(region.left), Int32(region.top),
                                       Int32(fullWidth), Int32(fullHeight), Int32(side), $0.baseAddress)
            }
        }
        guard status != -2 else { throw VipsError(operation: "square", message: "the decoded part of \(fullWidth)×\(fullHeight) does not hold the square") }
        guard status == 0 else { throw VipsError(operation: "square", message: "out of memory resampling \(fullWidth)×\(fullHeight)") }
        return out
    }

    /// The `cut`×`cut` square at (`left`, `top`) of packed 8-bit RGB `width` pixels wide,
    /// scaled to `side` (Lanczos3; the square's own edge pixels are repeated past its edges).
    public static func square(rgb: [UInt8], width: Int, left: Int, top: Int, cut: Int, side: Int) throws -> [UInt8] {
        var square = [UInt8]()
        square.reserveCapacity(cut * cut * 3)
        for y in top..<(top + cut) {
            let start = (y * width + left) * 3
            square.append(contentsOf: rgb[start..<(start + cut * 3)])
        }
        return try squareCentre(rgb: square, width: cut, height: cut, side: side)
    }

    /// Packed 8-bit RGB rotated clockwise by `rotate` degrees (0, 90, 180, 270),
    /// then mirrored left–right if `flip`: the same pixels as `rotated` then
    /// `flippedHorizontally` on a `VImage`, without a libvips pipeline.
    public static func oriented(rgb: [UInt8], width: Int, height: Int, rotate: Int, flip: Bool) -> (pixels: [UInt8], width: Int, height: Int) {
        precondition(rgb.count == width * height * 3, "RGB buffer does not match its size")
        precondition([0, 90, 180, 270].contains(rotate), "rotation is a multiple of 90 degrees")
        if rotate == 0 && !flip { return (rgb, width, height) }
        var out = [UInt8](repeating: 0, count: rgb.count)
        rgb.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { snap_orient_rgb(input.baseAddress, Int32(width), Int32(height), Int32(rotate), flip ? 1 : 0, $0.baseAddress) }
        }
        let swap = rotate == 90 || rotate == 270
        return (out, swap ? height : width, swap ? width : height)
    }

    /// Sums over neighbouring pixels of packed RGB `side`×`side`: absolute luma
    /// differences, absolute chroma (B − Y, R − Y) differences, and absolute luma
    /// second differences, over rows and columns (y = (77R + 150G + 29B) >> 8).
    public static func neighbourSums(rgb: [UInt8], side: Int) -> NeighbourSums {
        precondition(rgb.count >= side * side * 3, "RGB buffer does not match its size")
        var sums = NeighbourSums()
        rgb.withUnsafeBufferPointer {
            snap_pixel_steps($0.baseAddress, Int32(side), &sums.luma, &sums.chroma, &sums.second, &sums.flat, &sums.squares)
        }
        return sums
    }

    /// Sums over the pairs (and triples) of neighbouring pixels in rows and columns.
    public struct NeighbourSums: Sendable {
        /// |Δy|, with y = (77R + 150G + 29B) >> 8.
        public var luma = 0
        /// |Δ(B − Y)| + |Δ(R − Y)|.
        public var chroma = 0
        /// |2y − left − right| and |2y − up − down|.
        public var second = 0
        /// Pairs with |Δy| ≤ 1.
        public var flat = 0
        /// Δy².
        public var squares = 0
        public init() {}
    }
}
