import SnapThumbCore
import SnapThumbStore

/// How a pixel-art grid differs from the plain box average of the same square, in OKLab
/// (docs/pixel-art.md). The same measures as Benchmarks/quality/pixel_measures.py; the
/// pipeline never computes them, tests and benchmarks do.
public struct PixelArtMeasures: Sendable, Equatable {
    /// Mean chroma of the grid's cells over the average's.
    public var chroma: Double
    /// Standard deviation of the cells' lightness over the average's.
    public var spread: Double
    /// Mean OKLab distance between 4-neighbouring cells over the average's.
    public var contrast: Double
    /// Distinct colours in the grid.
    public var colours: Int
    /// Mean OKLab distance of a grid cell from the average's cell (how faithful it stays).
    public var drift: Double

    /// Issue 29's targets for the default style.
    public static let targets = (chroma: 1.15, spread: 1.10, contrast: 1.20, colours: 12.0, drift: 0.06)

    /// - Parameters:
    ///   - grid: the pixel grid, packed 8-bit sRGB, `side` × `side`.
    ///   - average: the box average of the square the grid was made from, the same size.
    public init(grid: [UInt8], average: [UInt8], side: Int) {
        precondition(grid.count == side * side * 3 && average.count == grid.count, "sizes differ")
        let g = OKLab.image(rgb: grid), a = OKLab.image(rgb: average)
        chroma = Self.meanChroma(g) / Self.meanChroma(a)
        spread = Self.lightnessDeviation(g) / Self.lightnessDeviation(a)
        contrast = Self.neighbourContrast(g, side: side) / Self.neighbourContrast(a, side: side)
        var seen = Set<[UInt8]>()
        for i in stride(from: 0, to: grid.count, by: 3) { seen.insert(Array(grid[i..<i + 3])) }
        colours = seen.count
        drift = zip(g, a).map { $0.distance($1) }.reduce(0, +) / Double(g.count)
    }

    /// The plain box average of a packed sRGB `side`-pixel square down to `cells` per side
    /// (rounded means of `side / cells` blocks).
    public static func boxAverage(rgb: [UInt8], side: Int, cells: Int) -> [UInt8] {
        let f = side / cells, area = f * f
        var out = [UInt8](repeating: 0, count: cells * cells * 3)
        for y in 0..<cells {
            for x in 0..<cells {
                for band in 0..<3 {
                    var sum = 0
                    for dy in 0..<f { for dx in 0..<f { sum += Int(rgb[((y * f + dy) * side + x * f + dx) * 3 + band]) } }
                    out[(y * cells + x) * 3 + band] = UInt8((sum + area / 2) / area)
                }
            }
        }
        return out
    }

    /// The mean of several images' measures (colours as a mean too, hence a Double).
    public static func mean(_ all: [PixelArtMeasures]) -> (chroma: Double, spread: Double, contrast: Double, colours: Double, drift: Double) {
        let n = Double(max(1, all.count))
        return (all.map(\.chroma).reduce(0, +) / n, all.map(\.spread).reduce(0, +) / n,
                all.map(\.contrast).reduce(0, +) / n, Double(all.map(\.colours).reduce(0, +)) / n,
                all.map(\.drift).reduce(0, +) / n)
    }

    static func meanChroma(_ c: [OKLab]) -> Double { c.map(\.chroma).reduce(0, +) / Double(c.count) }

    static func lightnessDeviation(_ c: [OKLab]) -> Double {
        let mean = c.map(\.l).reduce(0, +) / Double(c.count)
        return (c.map { ($0.l - mean) * ($0.l - mean) }.reduce(0, +) / Double(c.count)).squareRoot()
    }

    static func neighbourContrast(_ c: [OKLab], side: Int) -> Double {
        var sum = 0.0, pairs = 0
        for y in 0..<side {
            for x in 0..<side {
                if x + 1 < side { sum += c[y * side + x].distance(c[y * side + x + 1]); pairs += 1 }
                if y + 1 < side { sum += c[y * side + x].distance(c[(y + 1) * side + x]); pairs += 1 }
            }
        }
        return sum / Double(max(1, pairs))
    }
}
