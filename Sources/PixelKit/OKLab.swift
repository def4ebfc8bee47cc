import Foundation
import VipsKit

/// A colour in Björn Ottosson's OKLab: `l` is perceived lightness (0 black, 1 white), `a`
/// green–red, `b` blue–yellow. Euclidean distance in it follows how different two colours
/// look far better than distance in sRGB, which is why the drawn pixel art chooses and maps
/// its palette here (docs/pixel-art.md).
public struct OKLab: Sendable, Equatable {
    public var l: Double, a: Double, b: Double

    public init(l: Double, a: Double, b: Double) {
        self.l = l; self.a = a; self.b = b
    }

    /// The colour of 8-bit sRGB `red`, `green`, `blue`.
    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.init(linear: (OKLab.linearTable[Int(red)], OKLab.linearTable[Int(green)], OKLab.linearTable[Int(blue)]))
    }

    public init(_ colour: Colour) { self.init(red: colour.red, green: colour.green, blue: colour.blue) }

    /// The colour of linear-light sRGB components.
    public init(linear c: (Double, Double, Double)) {
        let l = OKLab.cubeRoot(0.4122214708 * c.0 + 0.5363325363 * c.1 + 0.0514459929 * c.2)
        let m = OKLab.cubeRoot(0.2119034982 * c.0 + 0.6806995451 * c.1 + 0.1073969566 * c.2)
        let s = OKLab.cubeRoot(0.0883024619 * c.0 + 0.2817188376 * c.1 + 0.6299787005 * c.2)
        self.init(l: 0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
                  a: 1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
                  b: 0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s)
    }

    /// The real cube root, in plain IEEE arithmetic: a first guess from the exponent
    /// bits (a few per cent off), then two Halley steps (each triples the correct
    /// digits: within 1e-12 of libm's `cbrt`, tested; the colours are 8-bit). glibc's `cbrt` cost 9 % of a worker's CPU in the drawn
    /// grid (three per pixel of the square), and arithmetic alone gives the same bits on
    /// every machine, where libm's last bit may differ between versions.
    @inline(__always)
    public static func cubeRoot(_ x: Double) -> Double {
        if x == 0 || !x.isFinite { return x }
        let v = abs(x)
        var y = Double(bitPattern: v.bitPattern / 3 + 0x2A9F_7893_782D_A1CE)
        for _ in 0..<2 {
            let y3 = y * y * y
            y *= (y3 + 2 * v) / (2 * y3 + v)
        }
        return x < 0 ? -y : y
    }

    /// Linear-light sRGB components (outside 0…1 when the colour is outside sRGB's gamut).
    public var linear: (Double, Double, Double) {
        let l1 = l + 0.3963377774 * a + 0.2158037573 * b
        let m1 = l - 0.1055613458 * a - 0.0638541728 * b
        let s1 = l - 0.0894841775 * a - 1.2914855480 * b
        let l3 = l1 * l1 * l1, m3 = m1 * m1 * m1, s3 = s1 * s1 * s1
        return (4.0767416621 * l3 - 3.3077115913 * m3 + 0.2309699292 * s3,
                -1.2684380046 * l3 + 2.6097574011 * m3 - 0.3413193965 * s3,
                -0.0041960863 * l3 - 0.7034186147 * m3 + 1.7076147010 * s3)
    }

    /// Whether the colour lies inside sRGB's gamut (with a hair of tolerance for rounding).
    public var inGamut: Bool {
        let c = linear, e = 1e-4
        return c.0 >= -e && c.0 <= 1 + e && c.1 >= -e && c.1 <= 1 + e && c.2 >= -e && c.2 <= 1 + e
    }

    /// Chroma: the distance from the grey axis.
    public var chroma: Double { (a * a + b * b).squareRoot() }

    /// The nearest 8-bit sRGB colour (components clamped).
    public var colour: Colour {
        let c = linear
        return Colour(red: OKLab.encode(c.0), green: OKLab.encode(c.1), blue: OKLab.encode(c.2))
    }

    /// The same lightness and hue with the chroma reduced just enough to fit sRGB
    /// (a bisection on the chroma scale; lightness is clamped to 0…1 first).
    public var clippedToGamut: OKLab {
        let base = OKLab(l: min(1, max(0, l)), a: a, b: b)
        if base.inGamut { return base }
        var low = 0.0, high = 1.0
        for _ in 0..<16 {
            let mid = (low + high) / 2
            if OKLab(l: base.l, a: a * mid, b: b * mid).inGamut { low = mid } else { high = mid }
        }
        return OKLab(l: base.l, a: a * low, b: b * low)
    }

    /// Squared Euclidean distance.
    @inline(__always)
    public func distanceSquared(_ other: OKLab) -> Double {
        let dl = l - other.l, da = a - other.a, db = b - other.b
        return dl * dl + da * da + db * db
    }

    public func distance(_ other: OKLab) -> Double { distanceSquared(other).squareRoot() }

    public static func + (x: OKLab, y: OKLab) -> OKLab { OKLab(l: x.l + y.l, a: x.a + y.a, b: x.b + y.b) }
    public static func / (x: OKLab, d: Double) -> OKLab { OKLab(l: x.l / d, a: x.a / d, b: x.b / d) }
    public static let zero = OKLab(l: 0, a: 0, b: 0)

    /// 8-bit sRGB to linear light, by table (the sRGB transfer curve).
    public static let linearTable: [Double] = (0..<256).map { value in
        let c = Double(value) / 255
        return c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
    }

    /// Linear light to 8-bit sRGB, rounded, clamped: `encodeByCurve`'s byte, found among the
    /// 255 linear values where the byte steps up (`encodeSteps`), instead of a `pow` (three per
    /// cell of every grid, 0.6–0.8 % of a snap's CPU).
    public static func encode(_ linear: Double) -> UInt8 { encoder.byte(linear) }

    /// The step tables, fetched once per batch of colours (`rgb`), not once per component.
    struct Encoder {
        let steps: [Double], start: [UInt8]

        @inline(__always)
        func byte(_ linear: Double) -> UInt8 {
            let c = min(1, max(0, linear))
            // The count of steps at or below c: from the count at the start of c's 1/4096 (the
            // curve climbs less than one byte in one: 3,295 bytes per unit at its steepest), on.
            var count = Int(start[min(4095, Int(c * 4096))])
            while count < 255 && steps[count] <= c { count += 1 }
            return UInt8(count)
        }
    }

    static let encoder: Encoder = {
        // The count of steps at or below i / 4096, for i in 0..<4096, in one pass over both.
        var start = [UInt8](repeating: 0, count: 4096), count = 0
        for i in 0..<4096 {
            while count < 255 && encodeSteps[count] <= Double(i) / 4096 { count += 1 }
            start[i] = UInt8(count)
        }
        return Encoder(steps: encodeSteps, start: start)
    }()

    /// The definition: the sRGB transfer curve by `pow`, rounded to 8 bits (`linear` in 0…1).
    public static func encodeByCurve(_ linear: Double) -> UInt8 {
        let c = min(1, max(0, linear))
        let v = c <= 0.0031308 ? c * 12.92 : 1.055 * pow(c, 1 / 2.4) - 0.055
        return UInt8((v * 255).rounded())
    }

    /// For each byte k in 1…255, the least linear value in 0…1 that `encodeByCurve` takes to k or
    /// more: from the curve's inverse, then a double at a time to the exact step (a few `pow`s
    /// each, once per process). The curve rises, so the byte is the count of steps at or below
    /// the value: far from a step `pow`'s error (under an ulp) cannot move the rounded byte, and
    /// near one the tests compare every double within 4,096 of it with `encodeByCurve`.
    public static let encodeSteps: [Double] = (1...255).map { k in
        let v = (Double(k) - 0.5) / 255
        var c = v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4)
        c = min(1, max(0, c))
        var moves = 0
        if encodeByCurve(c) >= k {
            while c > 0, encodeByCurve(c.nextDown) >= k, moves < 4096 { c = c.nextDown; moves += 1 }
        } else {
            while encodeByCurve(c) < k, moves < 4096 { c = c.nextUp; moves += 1 }
        }
        guard moves == 4096 else { return c }
        // Far from the inverse (a libm unlike glibc's): halve the range of the doubles' bits.
        var below: UInt64 = 0, above = (1.0).bitPattern  // encodeByCurve < k at below, >= k at above
        while above - below > 1 {
            let mid = below + (above - below) / 2
            if encodeByCurve(Double(bitPattern: mid)) >= k { above = mid } else { below = mid }
        }
        return Double(bitPattern: above)
    }

    /// Packed 8-bit sRGB to OKLab, one colour per pixel: `init(red:green:blue:)` of each,
    /// computed in C four pixels at a time (`OKLabKernels.image`: the same operations in the
    /// same order, so the same bits; tested on a grid of the whole cube).
    public static func image(rgb: [UInt8]) -> [OKLab] {
        interleaved(OKLabKernels.image(rgb: rgb, linearTable: linearTable))
    }

    /// Colours from interleaved l, a, b (as the kernels return them).
    public static func interleaved(_ values: [Double]) -> [OKLab] {
        (0..<(values.count / 3)).map { OKLab(l: values[3 * $0], a: values[3 * $0 + 1], b: values[3 * $0 + 2]) }
    }

    /// Interleaved l, a, b of the colours (as the kernels take them).
    public static func flat(_ colours: [OKLab]) -> [Double] {
        var values = [Double]()
        values.reserveCapacity(3 * colours.count)
        for c in colours { values.append(c.l); values.append(c.a); values.append(c.b) }
        return values
    }

    /// OKLab colours to packed 8-bit sRGB.
    public static func rgb(_ image: [OKLab]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(image.count * 3)
        let encoder = OKLab.encoder
        for c in image {
            let linear = c.linear
            out.append(encoder.byte(linear.0)); out.append(encoder.byte(linear.1)); out.append(encoder.byte(linear.2))
        }
        return out
    }
}
