import Foundation
import VipsKit

/// The grid of the `drawn` and `retro` styles: each cell takes the colour most of its
/// pixels share rather than their mean, then lightness and chroma are shaped for a tiny,
/// high-contrast picture. All in OKLab (docs/pixel-art.md has the measures and pictures).
///
/// Why not the mean: a cell that straddles an edge (a face against a wall) averages into a
/// colour neither side has, and 625 such cells make the "muddy mosaic". Splitting the cell's
/// pixels in two by 2-means and keeping the larger group keeps edges crisp, and in a flat
/// cell it is the mean.
public enum DrawnGrid {
    /// How much a style lifts the picture. Chosen on the corpus photos against the box
    /// average of the same square (docs/pixel-art.md): each lift alone was too weak or
    /// drifted too far, together they meet every target with drift under 0.06.
    public struct Lift: Sendable, Equatable {
        /// Lightness is stretched about its mean by this factor (global contrast).
        public var lightness: Double
        /// Lightness minus its 3×3 neighbourhood mean is added back times this (local contrast).
        public var local: Double
        /// a and b are scaled by this (chroma; hue is kept), then pulled into sRGB's gamut.
        public var chroma: Double
        /// A cell this much darker (ΔL) than its lightest 4-neighbour is darkened to
        /// `outlineDarken` of its lightness: the dark outline; nil for none.
        public var outline: Double?
        public var outlineDarken: Double = 0.8
        /// The largest drift (mean OKLab distance from the area average) the grid keeps before
        /// its lightness is drawn back toward the average (`faithful`); nil: no limit.
        public var driftLimit: Double?

        public init(lightness: Double, local: Double, chroma: Double, outline: Double?, outlineDarken: Double = 0.8,
                    driftLimit: Double? = nil) {
            self.lightness = lightness; self.local = local; self.chroma = chroma
            self.outline = outline; self.outlineDarken = outlineDarken; self.driftLimit = driftLimit
        }

        /// The `drawn` style's lift, held to issue 29's faithfulness (`DrawnGrid.driftLimit`).
        public static let drawn = Lift(lightness: 1.06, local: 0.25, chroma: 1.45, outline: 0.15, driftLimit: DrawnGrid.driftLimit)
        /// The `retro` style's, stronger: its fixed palette's colours are all vivid, and it is
        /// not held to the drift limit (a photo mapped to 16 fixed colours is far from its average).
        public static let retro = Lift(lightness: 1.15, local: 0.4, chroma: 1.7, outline: 0.1, outlineDarken: 0.7)
    }

    /// A cell this much darker (ΔL) than each of its 8 neighbours is a speckle, not a shape.
    public static let isolatedDark = 0.08

    /// `rgb` is packed sRGB, `side` × `side`; returns packed sRGB, (side / factor)² cells.
    /// The OKLab colours of the pixels and each cell's `representative` are computed in C
    /// (`OKLabKernels`: the same arithmetic in the same order, bit for bit; the tests hold
    /// the Swift loops this replaced and compare): they were most of the drawn style's cost.
    ///
    /// `faces` are face boxes in cell units (x0, y0, x1, y1; issue 38): the cells whose centre
    /// lies in one take the lighter of their two groups (skin, not hair or shadow), and are
    /// never darkened by the local contrast or the outline.
    public static func cells(rgb: [UInt8], side: Int, factor: Int, lift: Lift, faces: [FaceCells] = []) -> [UInt8] {
        let lab = OKLabKernels.image(rgb: rgb, linearTable: OKLab.linearTable)
        var grid = OKLab.interleaved(OKLabKernels.drawnCells(lab: lab, side: side, factor: factor))
        let n = side / factor
        let inFace = FaceCells.mask(faces, side: n)
        var means = [OKLab](repeating: .zero, count: inFace.count)
        var pixels = [OKLab](repeating: .zero, count: factor * factor)  // one buffer for every face cell
        for i in inFace.indices where inFace[i] {
            let (cx, cy) = (i % n, i / n)
            var k = 0
            for y in (cy * factor)..<((cy + 1) * factor) {
                for x in (cx * factor)..<((cx + 1) * factor) {
                    let p = 3 * (y * side + x)
                    pixels[k] = OKLab(l: lab[p], a: lab[p + 1], b: lab[p + 2])
                    k += 1
                }
            }
            // Halfway between the cell's mean and its lighter group: hair and shadow do not
            // win the cell, and the face is not paled either (its lightness change stays small).
            let mean = pixels.reduce(.zero, +) / Double(pixels.count), light = representative(pixels, lighter: true)
            grid[i] = (mean + light) / 2
            means[i] = mean
        }
        var result = shaped(grid, side: n, lift: lift, faces: inFace)
        // What the cells are compared with (issue 29's drift, issue 38's face measures): the
        // area average, each cell's plain sRGB mean (rounded) in OKLab. The mean of the
        // pixels' OKLab colours is a little darker than that (the cube root is concave).
        let average = areaAverage(rgb: rgb, side: side, factor: factor)
        // The face's colour: face cells near the faces' tone take it (one skin tone, which the
        // palette keeps a slot for), the rest (eyes, a beard) keep theirs. The tone has the
        // faces' own hue and chroma (their cells' plain means: the lighter groups lean to the
        // highlights' hue); its lightness is what keeps the face as light as its area average
        // overall: the lighter groups keep hair and shadow from winning cells, they do not pale
        // the face, and the features keep their darks.
        let faceCells = inFace.indices.filter { inFace[$0] }
        if !faceCells.isEmpty {
            let count = Double(faceCells.count)
            let drawn = faceCells.map { result[$0] }.reduce(.zero, +) / count
            let plain = faceCells.map { means[$0] }.reduce(.zero, +) / count
            // Which cells are skin: those near the tone the face would have if it gave back
            // three quarters of what its lighter groups added (at most 0.03).
            let lighter = min(0.03, 0.75 * max(0, drawn.l - plain.l))
            var skin = OKLab(l: drawn.l - lighter, a: plain.a, b: plain.b)
            var isSkin = [Bool](repeating: false, count: faceCells.count), features = 0.0, target = 0.0
            for (k, i) in faceCells.enumerated() {
                var cell = result[i]
                cell.l -= lighter
                result[i] = cell
                isSkin[k] = cell.distance(skin) < 0.1
                if !isSkin[k] { features += cell.l }
                target += average[i].l
            }
            let skinCount = isSkin.filter { $0 }.count
            if skinCount > 0 { skin.l = min(1, max(0, (target - features) / Double(skinCount))) }
            for (k, i) in faceCells.enumerated() where isSkin[k] { result[i] = skin }
        }
        if let limit = lift.driftLimit { result = faithful(result, average: average, faces: inFace, limit: limit) }
        return OKLab.rgb(result)
    }

    /// The largest mean OKLab distance (drift) a grid may keep from the area average before
    /// its lightness is drawn back toward it: issue 29's 0.06 for the faithfulness of `drawn`,
    /// less what the palette adds on top (about 0.003 on photos).
    public static let driftLimit = 0.055

    /// Each cell's area average in OKLab: the rounded mean of its `factor`×`factor` sRGB pixels
    /// (converted by the C kernel, the same colours as `OKLab(red:green:blue:)`).
    public static func areaAverage(rgb: [UInt8], side: Int, factor: Int) -> [OKLab] {
        // The means in C (`OKLabKernels.areaMeans`: integer sums, exact), then their OKLab.
        OKLab.image(rgb: OKLabKernels.areaMeans(rgb: rgb, side: side, factor: factor))
    }

    /// The grid kept within `limit` (a mean OKLab distance) of its area average: when its mean
    /// distance is over, the lightness of the cells outside faces is drawn back toward the
    /// average's (the same share for every cell, the largest that keeps the limit); only when
    /// the lightness alone cannot keep it (a picture of hard checks, where the representative
    /// colours differ from the mixes in hue too) are their hue and chroma drawn back as well.
    /// Faces are left to their own rule. A busy photo (a crowd, a collage) has an edge in most
    /// cells: the representative colour, the local contrast and the outline then all push the
    /// same cells darker, and the picture stops being the photo. A calm one is left as lifted.
    public static func faithful(_ grid: [OKLab], average: [OKLab], faces: [Bool], limit: Double) -> [OKLab] {
        // Each cell's distance from its average, in lightness and in hue and chroma (squared);
        // faces' whole distance is fixed.
        var light = [Double](repeating: 0, count: grid.count), colour = light, fixed = 0.0
        for i in grid.indices {
            let c = grid[i], m = average[i]
            if faces[i] { fixed += c.distance(m); continue }
            let dl = c.l - m.l, da = c.a - m.a, db = c.b - m.b
            light[i] = dl * dl; colour[i] = da * da + db * db
        }
        let count = Double(max(1, grid.count))
        func drift(_ l: Double, _ c: Double) -> Double {
            let l2 = l * l, c2 = c * c
            var sum = fixed
            for i in light.indices { sum += (l2 * light[i] + c2 * colour[i]).squareRoot() }
            return sum / count
        }
        func held(_ l: Double, _ c: Double) -> [OKLab] {
            grid.indices.map { i in
                guard !faces[i] else { return grid[i] }
                let g = grid[i], m = average[i]
                return OKLab(l: m.l + l * (g.l - m.l), a: m.a + c * (g.a - m.a), b: m.b + c * (g.b - m.b))
            }
        }
        guard drift(1, 1) > limit else { return grid }
        // The share x where the drift, fixed + Σ √(x²·scaled + kept), meets the limit: Newton's
        // steps from x = 1. The drift is convex and rising in x, so every step stays at or above
        // the root and comes down to it (a few steps; a bisection took ten passes).
        func share(_ scaled: [Double], _ kept: [Double]) -> Double {
            var x = 1.0
            for _ in 0..<8 {
                var sum = fixed, slope = 0.0
                for i in scaled.indices {
                    let r = (x * x * scaled[i] + kept[i]).squareRoot()
                    sum += r
                    if r > 0 { slope += x * scaled[i] / r }
                }
                let over = sum / count - limit
                guard over > 1e-7, slope > 0 else { break }
                x = max(0, x - over * count / slope)
            }
            return x
        }
        if drift(0, 1) <= limit { return held(share(light, colour), 1) }
        return held(0, share(colour, [Double](repeating: 0, count: colour.count)))
    }

    /// A face's box in cell units: x0, y0 (top left) to x1, y1 (bottom right).
    public struct FaceCells: Sendable, Equatable {
        public var x0: Double, y0: Double, x1: Double, y1: Double
        public init(x0: Double, y0: Double, x1: Double, y1: Double) { self.x0 = x0; self.y0 = y0; self.x1 = x1; self.y1 = y1 }

        /// Which cells of an n×n grid have their centre inside a face.
        public static func mask(_ faces: [FaceCells], side n: Int) -> [Bool] {
            var mask = [Bool](repeating: false, count: n * n)
            for f in faces {
                for y in 0..<n where Double(y) + 0.5 >= f.y0 && Double(y) + 0.5 <= f.y1 {
                    for x in 0..<n where Double(x) + 0.5 >= f.x0 && Double(x) + 0.5 <= f.x1 { mask[y * n + x] = true }
                }
            }
            return mask
        }
    }

    /// The mean of the larger of two 2-means groups of `pixels` (the one nearer the mean on a
    /// tie); the plain mean when the pixels are all close (a flat cell). The definition:
    /// `cells` runs the same arithmetic in C (`snap_drawn_cells`), tested to agree.
    /// With `lighter`, the lighter group's mean instead (a face's skin over hair and shadow).
    public static func representative(_ pixels: [OKLab], lighter: Bool = false) -> OKLab {
        let mean = pixels.reduce(.zero, +) / Double(pixels.count)
        // Seeds: the darkest and the lightest pixel (first of equals: deterministic).
        var dark = pixels[0], light = pixels[0]
        for p in pixels {
            if p.l < dark.l { dark = p }
            if p.l > light.l { light = p }
        }
        // Below this (OKLab ΔE) the cell looks flat: the mean is its colour.
        if dark.distance(light) < 0.06 { return mean }
        var centres = (dark, light), counts = (0, 0)
        for _ in 0..<4 {
            var sums = (OKLab.zero, OKLab.zero)
            counts = (0, 0)
            for p in pixels {
                if p.distanceSquared(centres.0) <= p.distanceSquared(centres.1) {
                    sums.0 = sums.0 + p; counts.0 += 1
                } else {
                    sums.1 = sums.1 + p; counts.1 += 1
                }
            }
            guard counts.0 > 0, counts.1 > 0 else { return mean }
            let next = (sums.0 / Double(counts.0), sums.1 / Double(counts.1))
            if next == centres { break }
            centres = next
        }
        if lighter { return centres.0.l >= centres.1.l ? centres.0 : centres.1 }
        if counts.0 != counts.1 { return counts.0 > counts.1 ? centres.0 : centres.1 }
        return abs(centres.0.l - mean.l) <= abs(centres.1.l - mean.l) ? centres.0 : centres.1
    }

    /// Global and local lightness contrast, chroma, the optional outline, then the gamut.
    public static func shaped(_ grid: [OKLab], side n: Int, lift: Lift, faces: [Bool] = []) -> [OKLab] {
        let lightness = liftedLightness(grid, side: n, lift: lift, faces: faces)
        // Each colour lifted, then `clippedToGamut` (in C, all at once: `OKLabKernels`).
        var lifted = [Double](repeating: 0, count: 3 * grid.count)
        // A face keeps its own colour: skin lifted in chroma turned orange, in lightness blotchy.
        for (i, c) in grid.enumerated() {
            let chroma = faces.count == grid.count && faces[i] ? 1 : lift.chroma
            (lifted[3 * i], lifted[3 * i + 1], lifted[3 * i + 2]) = (lightness[i], c.a * chroma, c.b * chroma)
        }
        var result = OKLab.interleaved(OKLabKernels.clippedToGamut(lab: lifted))
        // A saturated colour (an orange petal) moved in lightness leaves the gamut and
        // the clip takes more chroma than the lift gave: keep its lightness instead.
        let redo = grid.indices.filter { result[$0].chroma < grid[$0].chroma }
        var again = [Double](repeating: 0, count: 3 * redo.count)
        for (j, i) in redo.enumerated() { (again[3 * j], again[3 * j + 1], again[3 * j + 2]) = (grid[i].l, lifted[3 * i + 1], lifted[3 * i + 2]) }
        for (j, colour) in OKLab.interleaved(OKLabKernels.clippedToGamut(lab: again)).enumerated() { result[redo[j]] = colour }
        return result
    }

    /// Each cell's lightness after the global stretch, the local contrast and the outline, then
    /// without isolated dark cells. Face cells (`faces`, when given) are never darkened by
    /// the local contrast or the outline.
    ///
    /// The outline marks a cell only where the edge goes on: another marked cell among its
    /// 8 neighbours (a lone dark cell on foliage or a checked shirt is texture, not a shape's
    /// edge). A cell still darker than all 8 neighbours by more than `isolatedDark` takes
    /// their mean lightness: such speckles were most of the "noise" on textures (issue 38).
    public static func liftedLightness(_ grid: [OKLab], side n: Int, lift: Lift, faces: [Bool] = []) -> [Double] {
        let face = faces.count == n * n ? faces : [Bool](repeating: false, count: n * n)
        let meanL = grid.reduce(0) { $0 + $1.l } / Double(grid.count)
        let stretched = grid.map { meanL + ($0.l - meanL) * lift.lightness }
        // Each row's and column's neighbours, clamped: past the edge the edge cell stands in.
        // The sums below add the same cells in the same order as a loop over dy, then dx.
        let before = (0..<n).map { max(0, $0 - 1) }, after = (0..<n).map { min(n - 1, $0 + 1) }
        var lightness = [Double](repeating: 0, count: n * n)
        for y in 0..<n {
            let up = before[y] * n, row = y * n, down = after[y] * n
            for x in 0..<n {
                let xl = before[x], xr = after[x]
                var sum = 0.0
                sum += stretched[up + xl]; sum += stretched[up + x]; sum += stretched[up + xr]
                sum += stretched[row + xl]; sum += stretched[row + x]; sum += stretched[row + xr]
                sum += stretched[down + xl]; sum += stretched[down + x]; sum += stretched[down + xr]
                let l = stretched[row + x], local = lift.local * (l - sum / 9)
                lightness[row + x] = face[row + x] ? max(grid[row + x].l, l + local) : l + local
            }
        }
        if let threshold = lift.outline {
            let unmarked = lightness
            var marked = [Bool](repeating: false, count: n * n)
            for y in 0..<n {
                let up = before[y] * n, row = y * n, down = after[y] * n
                for x in 0..<n where !face[row + x] {
                    let l = unmarked[row + x]
                    let lightest = max(unmarked[row + after[x]], unmarked[row + before[x]], unmarked[down + x], unmarked[up + x])
                    marked[row + x] = lightest - l > threshold
                }
            }
            for y in 0..<n {
                for x in 0..<n where marked[y * n + x] {
                    // Another marked cell among the (unclamped) 8 neighbours.
                    var continues = false
                    for yy in max(0, y - 1)...min(n - 1, y + 1) {
                        for xx in max(0, x - 1)...min(n - 1, x + 1) where (xx != x || yy != y) && marked[yy * n + xx] {
                            continues = true
                        }
                    }
                    if continues { lightness[y * n + x] = unmarked[y * n + x] * lift.outlineDarken }
                }
            }
        }
        let shaped = lightness
        for y in 1..<max(1, n - 1) {
            let up = (y - 1) * n, row = y * n, down = (y + 1) * n
            for x in 1..<max(1, n - 1) {
                let l = shaped[row + x]
                // The 8 neighbours, rows top to bottom, columns left to right.
                let v0 = shaped[up + x - 1], v1 = shaped[up + x], v2 = shaped[up + x + 1]
                let v3 = shaped[row + x - 1], v4 = shaped[row + x + 1]
                let v5 = shaped[down + x - 1], v6 = shaped[down + x], v7 = shaped[down + x + 1]
                var sum = 0.0, darkest = Double.infinity
                sum += v0; darkest = min(darkest, v0); sum += v1; darkest = min(darkest, v1)
                sum += v2; darkest = min(darkest, v2); sum += v3; darkest = min(darkest, v3)
                sum += v4; darkest = min(darkest, v4); sum += v5; darkest = min(darkest, v5)
                sum += v6; darkest = min(darkest, v6); sum += v7; darkest = min(darkest, v7)
                if darkest - l > isolatedDark { lightness[row + x] = sum / 8 }
            }
        }
        return lightness
    }
}
