import Foundation
import Testing
@testable import SnapThumbCore
import VipsKit

/// The drawn style's hot loops run in C (`OKLabKernels`, `Sources/CKernelShim/oklab.c`) for
/// speed; the pixel art's bytes must not change by it. These tests hold the Swift code the C
/// replaced, verbatim, and require the same bits from both.
@Suite("OKLab kernels: bit for bit the Swift they replaced")
struct OKLabKernelTests {
    /// A small deterministic generator (SplitMix64).
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next() >> 56) }
        mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    }

    /// Before: one `init(red:green:blue:)` per pixel.
    static func referenceImage(_ rgb: [UInt8]) -> [OKLab] {
        stride(from: 0, to: rgb.count - 2, by: 3).map { OKLab(red: rgb[$0], green: rgb[$0 + 1], blue: rgb[$0 + 2]) }
    }

    /// Before: the cells' representatives, before shaping.
    static func referenceGrid(rgb: [UInt8], side: Int, factor: Int) -> [OKLab] {
        let lab = referenceImage(rgb)
        let n = side / factor
        var grid = [OKLab](repeating: .zero, count: n * n)
        var block = [OKLab]()
        for y in 0..<n {
            for x in 0..<n {
                block.removeAll(keepingCapacity: true)
                for dy in 0..<factor {
                    let row = (y * factor + dy) * side + x * factor
                    for dx in 0..<factor { block.append(lab[row + dx]) }
                }
                grid[y * n + x] = DrawnGrid.representative(block)
            }
        }
        return grid
    }

    /// Before: `DrawnGrid.shaped`'s last step, each colour clipped to the gamut by `OKLab.clippedToGamut`.
    static func referenceShaped(_ grid: [OKLab], side n: Int, lift: DrawnGrid.Lift) -> [OKLab] {
        let lightness = DrawnGrid.liftedLightness(grid, side: n, lift: lift)
        return grid.indices.map { i in
            let c = grid[i], a = c.a * lift.chroma, b = c.b * lift.chroma
            let lifted = OKLab(l: lightness[i], a: a, b: b).clippedToGamut
            if lifted.chroma >= c.chroma { return lifted }
            return OKLab(l: c.l, a: a, b: b).clippedToGamut
        }
    }

    /// Before: `OKLabQuantizer.kMeans` in plain Swift.
    static func referenceKMeans(_ points: [OKLab], k: Int, iterations: Int = 10) -> [OKLab] {
        func axis(_ p: OKLab, _ a: Int) -> Double { a == 0 ? p.l : a == 1 ? p.a : p.b }
        func extent(_ box: [Int]) -> (axis: Int, range: Double) {
            var best = (axis: 0, range: -1.0)
            for a in 0..<3 {
                var low = Double.infinity, high = -Double.infinity
                for i in box { low = min(low, axis(points[i], a)); high = max(high, axis(points[i], a)) }
                if high - low > best.range { best = (a, high - low) }
            }
            return best
        }
        var boxes = [Array(points.indices)]
        while boxes.count < k {
            var chosen = -1, score = 0.0
            for (i, box) in boxes.enumerated() where box.count > 1 {
                let s = extent(box).range * Double(box.count)
                if s > score { score = s; chosen = i }
            }
            guard chosen >= 0 else { break }
            let box = boxes[chosen], a = extent(box).axis
            let sorted = box.sorted { (axis(points[$0], a), $0) < (axis(points[$1], a), $1) }
            let half = sorted.count / 2
            boxes[chosen] = Array(sorted[..<half])
            boxes.append(Array(sorted[half...]))
        }
        var centres = boxes.map { box in box.reduce(OKLab.zero) { $0 + points[$1] } / Double(box.count) }
        var assignment = [Int](repeating: 0, count: points.count)
        for _ in 0..<iterations {
            var changed = false
            for (i, p) in points.enumerated() {
                var best = 0, bestDistance = Double.infinity
                for (j, c) in centres.enumerated() {
                    let d = p.distanceSquared(c)
                    if d < bestDistance { bestDistance = d; best = j }
                }
                if assignment[i] != best { assignment[i] = best; changed = true }
            }
            var sums = [OKLab](repeating: .zero, count: centres.count), counts = [Int](repeating: 0, count: centres.count)
            for (i, p) in points.enumerated() { sums[assignment[i]] = sums[assignment[i]] + p; counts[assignment[i]] += 1 }
            for j in centres.indices where counts[j] > 0 { centres[j] = sums[j] / Double(counts[j]) }
            if !changed { break }
        }
        return centres
    }

    static func bits(_ colours: [OKLab]) -> [UInt64] { colours.flatMap { [$0.l.bitPattern, $0.a.bitPattern, $0.b.bitPattern] } }

    /// Photo-like squares: smooth gradients, noise, flat patches, hard two-tone edges, black.
    static func squares(side: Int) -> [[UInt8]] {
        var random = Random(state: 27)
        var out: [[UInt8]] = []
        for kind in 0..<6 {
            var rgb = [UInt8](repeating: 0, count: side * side * 3)
            for y in 0..<side {
                for x in 0..<side {
                    let p = (y * side + x) * 3
                    switch kind {
                    case 0: for k in 0..<3 { rgb[p + k] = random.byte() }
                    case 1: rgb[p] = UInt8(x * 255 / side); rgb[p + 1] = UInt8(y * 255 / side); rgb[p + 2] = UInt8((x + y) * 127 / side)
                    case 2: for k in 0..<3 { rgb[p + k] = UInt8(clamping: 120 + Int(random.byte() % 9) - 4 + k * 20) }
                    case 3: let dark = (x * 7 + y * 3) % 13 < 6
                        rgb[p] = dark ? 30 : 230; rgb[p + 1] = dark ? 40 : 190; rgb[p + 2] = dark ? 20 : 160
                    case 4: rgb[p] = (x / 4 + y / 4) % 3 == 0 ? 0 : 255; rgb[p + 1] = rgb[p]; rgb[p + 2] = (x + y) % 2 == 0 ? 0 : 1
                    default: for k in 0..<3 { rgb[p + k] = UInt8(clamping: Int(random.byte() % 64) + (x < side / 2 ? 0 : 180)) }
                    }
                }
            }
            out.append(rgb)
        }
        return out
    }

    @Test("OKLab.image: every pixel as init(red:green:blue:), on a grid of the colour cube and every grey and primary")
    func image() {
        var rgb: [UInt8] = []
        for r in stride(from: 0, through: 255, by: 5) {
            for g in stride(from: 0, through: 255, by: 5) {
                for b in stride(from: 0, through: 255, by: 5) { rgb += [UInt8(r), UInt8(g), UInt8(b)] }
            }
        }
        for v in 0...255 {
            let u = UInt8(v)
            rgb += [u, u, u, u, 0, 0, 0, u, 0, 0, 0, u, 255, u, 0]
        }
        rgb += [7, 8] // a partial pixel at the end is not a pixel
        for count in [rgb.count, 3, 6, 9, 15, 0] {
            let part = Array(rgb.prefix(count))
            #expect(Self.bits(OKLab.image(rgb: part)) == Self.bits(Self.referenceImage(part)), "\(count) bytes")
        }
    }

    @Test("drawn cells: each cell's representative as DrawnGrid.representative, and the same shaped grid",
          arguments: [(100, 4), (40, 4), (30, 3), (24, 2), (9, 1)])
    func cells(side: Int, factor: Int) {
        for (k, rgb) in Self.squares(side: side).enumerated() {
            let lab = OKLabKernels.image(rgb: rgb, linearTable: OKLab.linearTable)
            let grid = OKLab.interleaved(OKLabKernels.drawnCells(lab: lab, side: side, factor: factor))
            #expect(Self.bits(grid) == Self.bits(Self.referenceGrid(rgb: rgb, side: side, factor: factor)), "square \(k)")
            for style in [Settings.PixelStyle.drawn, .retro] {
                guard let lift = style.lift else { continue }
                let shaped = Self.referenceShaped(Self.referenceGrid(rgb: rgb, side: side, factor: factor), side: side / factor, lift: lift)
                #expect(Self.bits(DrawnGrid.shaped(grid, side: side / factor, lift: lift)) == Self.bits(shaped), "square \(k), \(style)")
                // drawn is then held to its drift limit against the area average (retro is not).
                let held = lift.driftLimit.map { DrawnGrid.faithful(shaped, average: DrawnGrid.areaAverage(rgb: rgb, side: side, factor: factor),
                                                                    faces: [Bool](repeating: false, count: shaped.count), limit: $0) } ?? shaped
                #expect(DrawnGrid.cells(rgb: rgb, side: side, factor: factor, lift: lift) == OKLab.rgb(held), "square \(k), \(style)")
            }
        }
    }

    /// Cells of crafted OKLab colours, not photos: values on a coarse lattice (so that a pixel
    /// is often exactly as far from both seeds, and the first-of-equals rules decide), cells
    /// of two colours (the 2-means settles at once), near-flat cells (the 0.06 test), signed
    /// zeros and a NaN here and there. The C kernel takes four cells at a time: every cell
    /// count and size must give `DrawnGrid.representative`'s bits, each cell on its own.
    @Test("drawn cells: crafted colours with ties, flat cells, signed zeros and NaN give each cell's representative",
          arguments: [(25, 4), (9, 4), (7, 3), (6, 2), (5, 1), (3, 8)])
    func craftedCells(n: Int, factor: Int) {
        var random = Random(state: 41)
        let side = n * factor
        for kind in 0..<5 {
            let seeds = (0..<4).map { _ in OKLab(l: random.unit(), a: random.unit() - 0.5, b: random.unit() - 0.5) }
            let colours: [OKLab] = (0..<(side * side)).map { _ in
                switch kind {
                case 0: return OKLab(l: Double(random.next() % 4) / 4, a: Double(random.next() % 3) / 4 - 0.25, b: Double(random.next() % 3) / 4 - 0.25)
                case 1: return seeds[Int(random.next() % 2)]
                case 2: let s = seeds[0]; return OKLab(l: s.l + random.unit() * 0.01, a: s.a, b: s.b + random.unit() * 0.01)
                case 3: return OKLab(l: random.next() % 2 == 0 ? 0.0 : -0.0, a: random.next() % 2 == 0 ? 0.0 : -0.0, b: 0.0)
                default: return random.next() % 40 == 0 ? OKLab(l: .nan, a: 0, b: 0) : seeds[Int(random.next() % 4)]
                }
            }
            let lab = colours.flatMap { [$0.l, $0.a, $0.b] }
            let grid = OKLab.interleaved(OKLabKernels.drawnCells(lab: lab, side: side, factor: factor))
            var expected: [OKLab] = []
            for y in 0..<n {
                for x in 0..<n {
                    var block: [OKLab] = []
                    for dy in 0..<factor { for dx in 0..<factor { block.append(colours[(y * factor + dy) * side + x * factor + dx]) } }
                    expected.append(DrawnGrid.representative(block))
                }
            }
            #expect(Self.bits(grid) == Self.bits(expected), "kind \(kind), \(n)×\(n) cells of \(factor)×\(factor)")
        }
    }

    @Test("gamut clip: the same colours as OKLab.clippedToGamut, inside, outside, on the edges and at odd counts")
    func gamutClip() {
        var random = Random(state: 27)
        var colours: [OKLab] = [.zero, OKLab(l: -0.0, a: 0, b: 0), OKLab(l: 1, a: 0, b: 0), OKLab(l: -0.0, a: 0.3, b: -0.2),
                                OKLab(l: 1.2, a: 0.4, b: 0.1), OKLab(l: -0.3, a: -0.1, b: 0.05), OKLab(l: 0.5, a: .nan, b: 0),
                                OKLab(l: .nan, a: 0.1, b: 0.1), OKLab(l: 0.7, a: .infinity, b: 0)]
        for _ in 0..<4000 {
            colours.append(OKLab(l: random.unit() * 1.6 - 0.3, a: random.unit() * 1.0 - 0.5, b: random.unit() * 1.0 - 0.5))
        }
        // Near the gamut's surface: in-gamut colours pushed a hair outwards.
        for _ in 0..<2000 {
            let c = OKLab(red: random.byte(), green: random.byte(), blue: random.byte())
            let push = 1 + random.unit() * 1e-3
            colours.append(OKLab(l: c.l, a: c.a * push, b: c.b * push))
        }
        for count in [colours.count, 1, 2, 3, 4, 5, 7, 0] {
            let part = Array(colours.prefix(count))
            let flat = part.flatMap { [$0.l, $0.a, $0.b] }
            let clipped = OKLab.interleaved(OKLabKernels.clippedToGamut(lab: flat))
            #expect(Self.bits(clipped) == Self.bits(part.map(\.clippedToGamut)), "\(count) colours")
        }
    }

    @Test("k-means: the same centres as the plain Swift, on random, clustered and tied points", arguments: [2, 3, 4, 12, 16, 40])
    func kMeans(k: Int) {
        var random = Random(state: UInt64(k))
        var sets: [[OKLab]] = [[OKLab(l: 0.5, a: 0, b: 0)], [OKLab(l: 0.2, a: 0.1, b: 0), OKLab(l: 0.2, a: 0.1, b: 0)]]
        sets.append((0..<625).map { _ in OKLab(l: random.unit(), a: random.unit() * 0.6 - 0.3, b: random.unit() * 0.6 - 0.3) })
        // Clusters with exact duplicates: ties in the median cut's sort and in the nearest centre.
        let seeds = (0..<5).map { _ in OKLab(l: random.unit(), a: random.unit() * 0.2 - 0.1, b: random.unit() * 0.2 - 0.1) }
        sets.append((0..<625).map { i in seeds[i % 5] + OKLab(l: Double(i % 3) * 0.01, a: 0, b: Double(i % 2) * -0.005) })
        for rgb in Self.squares(side: 25) { sets.append(OKLab.image(rgb: rgb)) }
        for (n, points) in sets.enumerated() {
            #expect(Self.bits(OKLabQuantizer.kMeans(points, k: k)) == Self.bits(Self.referenceKMeans(points, k: k)), "set \(n)")
            #expect(Self.bits(OKLabQuantizer.kMeans(points, k: k, iterations: 1)) == Self.bits(Self.referenceKMeans(points, k: k, iterations: 1)))
        }
    }

    /// Before: `OKLabQuantizer.map`, nearest colour by a Swift loop per pixel.
    static func referenceMap(_ lab: [OKLab], width: Int, palette: [OKLab], ordered: Bool, lightnessWeight: Double = 1,
                             mayDither: [Bool]? = nil, greyRamp: Bool = false) -> [UInt8] {
        let w = lightnessWeight, bayer = OKLabQuantizer.bayer, greyChroma = OKLabQuantizer.greyChroma
        let greys = palette.indices.filter { palette[$0].chroma < greyChroma }
        let palette = palette.map { OKLab(l: $0.l * w, a: $0.a, b: $0.b) }
        return lab.indices.map { i in
            var c = lab[i]
            if ordered && (mayDither?[i] ?? true) { c.l += bayer[(i / width % 4) * 4 + i % width % 4] * OKLabQuantizer.ditherStrength }
            if greyRamp && greys.count >= 2 && c.chroma < greyChroma {
                return UInt8(greys.min { abs(palette[$0].l - c.l * w) < abs(palette[$1].l - c.l * w) }!)
            }
            c.l *= w
            var best = 0, bestDistance = Double.infinity
            for (j, p) in palette.enumerated() {
                let d = c.distanceSquared(p)
                if d < bestDistance { bestDistance = d; best = j }
            }
            return UInt8(best)
        }
    }

    /// Before: `OKLabQuantizer.vivid`, nearest centre by a Swift loop per point.
    static func referenceVivid(_ centres: [OKLab], _ points: [OKLab], weights: [Double]? = nil) -> [OKLab] {
        var chroma = [Double](repeating: 0, count: centres.count), counts = chroma
        for (i, p) in points.enumerated() {
            var best = 0, bestDistance = Double.infinity
            for (j, c) in centres.enumerated() {
                let d = p.distanceSquared(c)
                if d < bestDistance { bestDistance = d; best = j }
            }
            let w = weights?[i] ?? 1
            chroma[best] += w * p.chroma; counts[best] += w
        }
        return centres.indices.map { j in
            let c = centres[j], own = c.chroma, scale = counts[j] > 0 && own > 1e-9 ? chroma[j] / counts[j] / own : 1
            return OKLab(l: c.l, a: c.a * scale, b: c.b * scale).clippedToGamut
        }
    }

    /// Before: `DrawnGrid.areaAverage`'s sums in Swift.
    static func referenceAreaMeans(rgb: [UInt8], side: Int, factor: Int) -> [UInt8] {
        let n = side / factor, area = factor * factor
        var sums = [Int](repeating: 0, count: 3 * n * n)
        for y in 0..<(n * factor) {
            for x in 0..<(n * factor) {
                for band in 0..<3 { sums[3 * ((y / factor) * n + x / factor) + band] += Int(rgb[3 * (y * side + x) + band]) }
            }
        }
        return sums.map { UInt8(($0 + area / 2) / area) }
    }

    /// Point sets with exact ties (duplicates, and colours equally far from two centres).
    static func pointSets(_ random: inout Random) -> [[OKLab]] {
        var sets: [[OKLab]] = [[], [OKLab(l: 0.5, a: 0, b: 0)]]
        sets.append((0..<625).map { _ in OKLab(l: random.unit(), a: random.unit() * 0.6 - 0.3, b: random.unit() * 0.6 - 0.3) })
        sets.append((0..<627).map { i in OKLab(l: Double(i % 5) * 0.25, a: Double(i % 3) * 0.05 - 0.05, b: 0) })
        for rgb in Self.squares(side: 25) { sets.append(OKLab.image(rgb: rgb)) }
        return sets
    }

    @Test("nearest centre: the first of equals, as a Swift loop over the centres, with its distance")
    func nearest() {
        var random = Random(state: 41)
        let sets = Self.pointSets(&random)
        for (n, points) in sets.enumerated() {
            for k in [0, 1, 2, 5, 16] {
                // Centres from the points themselves (exact hits) and midway (exact ties), and a duplicate.
                var centres = (0..<k).map { j in points.isEmpty ? OKLab(l: Double(j) / 16, a: 0, b: 0) : points[(j * 37) % points.count] }
                if k >= 2 { centres[1] = centres[0] }
                let found = OKLabKernels.nearest(points: OKLab.flat(points), centres: OKLab.flat(centres))
                for (i, p) in points.enumerated() {
                    var best = 0, bestDistance = Double.infinity
                    for (j, c) in centres.enumerated() {
                        let d = p.distanceSquared(c)
                        if d < bestDistance { bestDistance = d; best = j }
                    }
                    #expect(found.index[i] == best && found.distance[i].bitPattern == bestDistance.bitPattern, "set \(n), k \(k), point \(i)")
                }
            }
        }
    }

    @Test("median-cut order: the C sort gives the Swift sort's order and the split its halves, with ties, signed zeros and odd lengths")
    func sortedBox() {
        var random = Random(state: 7)
        for n in [0, 1, 2, 15, 16, 17, 33, 100, 625, 1875] {
            let values = (0..<n).map { i -> Double in
                switch random.next() % 4 {
                case 0: return i % 2 == 0 ? 0.0 : -0.0
                case 1: return Double(random.next() % 4) * 0.125
                default: return random.unit() - 0.5
                }
            }
            // A box in no particular order, as a split leaves it.
            let box = (0..<n).filter { $0 % 3 != 1 } + (0..<n).filter { $0 % 3 == 1 }.reversed()
            let expected = box.sorted { values[$0] < values[$1] || (values[$0] == values[$1] && $0 < $1) }
            #expect(OKLabKernels.sortedBox(box, by: values) == expected, "\(n) values")
            // In order already (kept as it is), and in order but for the last two or a tie's indices.
            #expect(OKLabKernels.sortedBox(expected, by: values) == expected, "\(n) values, sorted")
            let split = OKLabKernels.medianSplit(box, by: values)
            #expect(split.lower.sorted() == expected[..<(n / 2)].sorted() && split.upper.sorted() == expected[(n / 2)...].sorted(),
                    "\(n) values, split")
            if n >= 2 {
                #expect(OKLabKernels.sortedBox(expected[..<(n - 2)] + [expected[n - 1], expected[n - 2]], by: values) == expected)
                let ties = [Double](repeating: 0.25, count: n)
                #expect(OKLabKernels.sortedBox(Array(0..<n).reversed(), by: ties) == Array(0..<n), "\(n) equal values")
            }
        }
    }

    @Test("area means: the rounded block means of the Swift sums", arguments: [(100, 4), (20, 4), (18, 4), (9, 3), (7, 1)])
    func areaMeans(side: Int, factor: Int) {
        var random = Random(state: UInt64(side * factor))
        let rgb = (0..<(side * side * 3)).map { _ in random.byte() }
        #expect(OKLabKernels.areaMeans(rgb: rgb, side: side, factor: factor) == Self.referenceAreaMeans(rgb: rgb, side: side, factor: factor))
        for square in Self.squares(side: side) {
            #expect(DrawnGrid.areaAverage(rgb: square, side: side, factor: factor)
                    == OKLab.image(rgb: Self.referenceAreaMeans(rgb: square, side: side, factor: factor)))
        }
    }

    @Test("palette mapping and vivid centres: the Swift loops' choices, dithered or not, weighted, with a grey ramp")
    func mapping() {
        var random = Random(state: 38)
        let fixed = ["#000000", "#1D2B53", "#7E2553", "#008751", "#AB5236", "#5F574F", "#C2C3C7", "#FFF1E8",
                     "#FF004D", "#FFA300", "#FFEC27", "#00E436", "#29ADFF", "#83769C", "#FF77A8", "#FFCCAA"]
            .compactMap(Colour.init(hex:)).map(OKLab.init)
        for (n, points) in Self.pointSets(&random).enumerated() where !points.isEmpty {
            let width = points.count % 25 == 0 ? 25 : points.count
            let adaptive = OKLabQuantizer.kMeans(points, k: 12)
            let mayDither = OKLabQuantizer.gradientCells(points, width: width)
            for palette in [adaptive, fixed, [fixed[0]]] {
                for (ordered, weight, grey) in [(false, 1.0, false), (true, 1.0, false), (true, 0.7, true), (false, 0.7, true)] {
                    for may in [nil, mayDither] {
                        #expect(OKLabQuantizer.map(points, width: width, palette: palette, ordered: ordered, lightnessWeight: weight,
                                                   mayDither: may, greyRamp: grey)
                                == Self.referenceMap(points, width: width, palette: palette, ordered: ordered, lightnessWeight: weight,
                                                     mayDither: may, greyRamp: grey), "set \(n)")
                    }
                }
            }
            let weights = points.indices.map { $0 % 7 == 0 ? 3.0 : 1.0 }
            #expect(Self.bits(OKLabQuantizer.vivid(adaptive, points)) == Self.bits(Self.referenceVivid(adaptive, points)), "set \(n)")
            #expect(Self.bits(OKLabQuantizer.vivid(adaptive, points, weights: weights))
                    == Self.bits(Self.referenceVivid(adaptive, points, weights: weights)), "set \(n)")
        }
    }

    @Test("sRGB encoding by the table of steps: the pow curve's byte at every step, 4,096 doubles either side, and a sweep")
    func encodeSteps() {
        let steps = OKLab.encodeSteps
        #expect(steps.count == 255)
        for (j, step) in steps.enumerated() {
            let k = j + 1
            #expect(OKLab.encodeByCurve(step) == UInt8(k) && OKLab.encodeByCurve(step.nextDown) == UInt8(k - 1), "step \(k)")
            var below = step, above = step
            for _ in 0..<4096 {
                below = below.nextDown; above = above.nextUp
                if OKLab.encode(below) != OKLab.encodeByCurve(below) || OKLab.encode(above) != OKLab.encodeByCurve(above) {
                    Issue.record("near step \(k): \(below) or \(above)"); break
                }
            }
        }
        var random = Random(state: 2)
        var values: [Double] = [0, -0.0, 1, 1.0.nextUp, -1, 2, .nan, .infinity, -.infinity, 0.0031308, 0.0031308.nextUp, .leastNonzeroMagnitude]
        for i in 0...100_000 { values.append(Double(i) / 100_000) }
        for _ in 0..<100_000 { values.append(random.unit()); values.append(random.unit() * random.unit() * 0.01) }
        for v in values { #expect(OKLab.encode(v) == OKLab.encodeByCurve(v), "\(v)") }
    }

    @Test("PNG row packing: the same bytes as packing index by index", arguments: [1, 2, 4, 8])
    func packing(depth: Int) {
        var random = Random(state: UInt64(depth))
        for width in 1...19 {
            let height = 3
            let indices = (0..<(width * height)).map { _ in UInt8(random.next() % UInt64(1 << depth)) }
            let perByte = 8 / depth, rowBytes = (width * depth + 7) / 8
            var expected = [UInt8](repeating: 0, count: rowBytes * height)
            for y in 0..<height {
                for x in 0..<width {
                    expected[y * rowBytes + x / perByte] |= indices[y * width + x] << ((perByte - 1 - x % perByte) * depth)
                }
            }
            #expect(Zlib.packedRows(indices: indices, width: width, height: height, depth: depth) == expected, "width \(width)")
        }
    }
}
