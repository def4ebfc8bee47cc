import Foundation
import VipsKit

/// Palette choice and mapping in OKLab, for the `drawn` and `retro` styles: an adaptive
/// palette is median cut then refined by k-means on the cells' OKLab colours, and every
/// pixel (a fixed palette's too) takes the palette colour that looks nearest. libimagequant
/// and the redmean distance of the `soft` style judge colours in gamma-encoded RGB, where a
/// dark green and a grey are close: that is how a park turned grey-green, and how PICO-8
/// mapped skin to brown-grey.
public enum OKLabQuantizer {
    /// - Parameter fixed: a fixed palette (its most used `colours`), or nil for an adaptive one.
    /// - Parameter ordered: 4×4 Bayer ordered dithering of lightness (a regular pattern, not
    ///   Floyd–Steinberg's worms, which on 25 cells read as noise).
    /// - Parameter reserved: colours an adaptive palette keeps whatever k-means finds (a face's
    ///   skin, issue 38; a fixed palette gives the skin tone's cells its nearest skin colour,
    ///   `skinEntry`); an adaptive palette also keeps a slot for the most salient outlier
    ///   (the cell farthest from every other palette colour, when it is far: a kite in the sky).
    /// - Parameter faces: which pixels are in a face (issue 38); an adaptive palette counts them
    ///   `faceWeight` times, so that a small face among vivid flowers still gets colours of its
    ///   own (its hair and eyes went to the flowers' browns and reds).
    /// - Parameter lab: `rgb` in OKLab when the caller has it already (`OKLab.image(rgb:)`).
    public static func indexed(rgb: [UInt8], width: Int, height: Int, colours: Int, fixed fixedColours: [Colour]?,
                        ordered: Bool, reserved: [Colour] = [], faces: [Bool] = [], lab known: [OKLab]? = nil) -> IndexedImage {
        let lab = known ?? OKLab.image(rgb: rgb)
        let mayDither = ordered ? gradientCells(lab, width: width) : nil
        var palette: [Colour]
        if let fixed = fixedColours {
            palette = fixed
            if colours < fixed.count {
                // Keep the fixed colours the image uses most.
                let usage = PaletteIndices.histogram(map(lab, width: width, palette: fixed.map(OKLab.init), ordered: ordered,
                                                    lightnessWeight: fixedLightnessWeight, mayDither: mayDither), count: fixed.count)
                let keep = usage.indices.sorted { usage[$0] != usage[$1] ? usage[$0] > usage[$1] : $0 < $1 }.prefix(colours)
                palette = keep.sorted().map { fixed[$0] }
            }
        } else {
            let kept = colours >= 6 ? reserved.prefix(1).map(OKLab.init) : []
            // Face cells weigh more, but not those of the kept skin colour: that one has its slot;
            // the weight is for the face's other colours (hair, eyes, shadow).
            let skin = colours >= 6 ? reserved.first : nil
            let heavy = faces.count == lab.count
                ? lab.indices.map { i in faces[i] && Colour(red: rgb[3 * i], green: rgb[3 * i + 1], blue: rgb[3 * i + 2]) != skin }
                : []
            var points = lab
            if heavy.contains(true) {
                let inFace = lab.indices.filter { heavy[$0] }.map { lab[$0] }
                for _ in 1..<faceWeight { points += inFace }
            }
            let found = kMeans(points, k: colours - kept.count - (colours >= 6 ? 1 : 0))
            var centres = vivid(found, lab, weights: heavy.contains(true) ? heavy.map { $0 ? Double(faceWeight) : 1 } : nil) + kept
            if colours >= 6 { centres += outlier(lab, centres).map { [$0] } ?? [] }
            palette = centres.map(\.colour)
        }
        // A stable order: darkest first (as the soft style).
        palette = Array(Set(palette)).sorted { ($0.luma, $0.red, $0.green, $0.blue) < ($1.luma, $1.red, $1.green, $1.blue) }
        var indices = map(lab, width: width, palette: palette.map(OKLab.init), ordered: ordered,
                          lightnessWeight: fixedColours == nil ? 1 : fixedLightnessWeight, mayDither: mayDither,
                          greyRamp: fixedColours != nil)
        // A fixed palette has no slot to keep for a face's skin: its cells of the skin tone take
        // the palette's nearest skin colour instead of whatever is nearest (retro sent shaded skin
        // to PICO-8's dark grey or lavender).
        if fixedColours != nil, let skin = reserved.first, let entry = skinEntry(OKLab(skin), palette.map(OKLab.init)) {
            for i in indices.indices where rgb[3 * i] == skin.red && rgb[3 * i + 1] == skin.green && rgb[3 * i + 2] == skin.blue {
                indices[i] = UInt8(entry)
            }
        }
        return PaletteIndices.compacted(width: width, height: height, palette: palette, indices: indices)
    }

    /// The palette colour a face's skin tone takes from a fixed palette: the nearest (lightness
    /// weighted `fixedLightnessWeight`) of the colours that are not grey and lie within 45° of the
    /// skin's hue (PICO-8: the peach, orange or brown). nil for a grey face (a black-and-white
    /// photo keeps the grey ramp) or when the palette has no such colour.
    public static func skinEntry(_ skin: OKLab, _ palette: [OKLab]) -> Int? {
        guard skin.chroma >= greyChroma else { return nil }
        let hue = atan2(skin.b, skin.a), w = fixedLightnessWeight
        var best: Int?, bestDistance = Double.infinity
        for (j, p) in palette.enumerated() where p.chroma >= greyChroma {
            var turn = abs(atan2(p.b, p.a) - hue)
            if turn > Double.pi { turn = 2 * Double.pi - turn }
            guard turn <= Double.pi / 4 else { continue }
            let d = OKLab(l: skin.l * w, a: skin.a, b: skin.b).distanceSquared(OKLab(l: p.l * w, a: p.a, b: p.b))
            if d < bestDistance { bestDistance = d; best = j }
        }
        return best
    }

    /// How many times an adaptive palette's k-means counts a face cell. Faces first: on the
    /// generated photos of people (small faces on vivid flowers) 2 kept 96 % of the faces' skin
    /// hue and 3 kept 97.5 %, with 23 % and 21 % dark face cells (the real photos barely moved);
    /// chosen there, and a weight, not a share: a face gets more colours, not all of them.
    public static let faceWeight = 3

    /// Bayer's 4×4 threshold matrix, centred on zero (−15/32 … 15/32).
    public static let bayer: [Double] = [0, 8, 2, 10, 12, 4, 14, 6, 3, 11, 1, 9, 15, 7, 13, 5].map { Double($0) / 16 - 15.0 / 32 }
    /// The lightness swing of the ordered dither: about the gap between neighbouring
    /// lightnesses of a 16-colour palette, so that a tone between two colours becomes a pattern.
    public static let ditherStrength = 0.06

    /// A fixed palette's lightness differences count this much against hue and chroma. A
    /// fixed palette has few colours far apart; by plain OKLab distance a muted skin tone
    /// (#E0AC90) is nearest PICO-8's light grey, a colour without its hue. With lightness
    /// weighted 0.7 it maps to the peach (#FFCCAA), and olive to green rather than grey.
    public static let fixedLightnessWeight = 0.7

    /// Nearest palette colour per pixel in OKLab (lightness differences weighted by
    /// `lightnessWeight`), with the optional ordered dither.
    /// `mayDither` (when given) says which cells the ordered dither may touch; with `greyRamp`
    /// a near-grey cell takes the palette's nearest grey by lightness (when it has two or more).
    public static func map(_ lab: [OKLab], width: Int, palette: [OKLab], ordered: Bool, lightnessWeight: Double = 1,
                           mayDither: [Bool]? = nil, greyRamp: Bool = false) -> [UInt8] {
        let w = lightnessWeight
        let greys = palette.indices.filter { palette[$0].chroma < greyChroma }
        let palette = palette.map { OKLab(l: $0.l * w, a: $0.a, b: $0.b) }
        // Each pixel dithered, its lightness weighted, then its nearest palette colour (the
        // first of equals) in C (`OKLabKernels.nearest`); near-greys may take the grey ramp.
        var dithered = lab
        if ordered {
            for i in dithered.indices where mayDither?[i] ?? true { dithered[i].l += bayer[(i / width % 4) * 4 + i % width % 4] * ditherStrength }
        }
        var points = [Double]()
        points.reserveCapacity(3 * dithered.count)
        for c in dithered { points.append(c.l * w); points.append(c.a); points.append(c.b) }
        let nearest = OKLabKernels.nearest(points: points, centres: OKLab.flat(palette)).index
        return dithered.indices.map { i in
            let c = dithered[i]
            if greyRamp && greys.count >= 2 && c.chroma < greyChroma {
                return UInt8(greys.min { abs(palette[$0].l - c.l * w) < abs(palette[$1].l - c.l * w) }!)
            }
            return UInt8(nearest[i])
        }
    }

    /// Below this chroma a colour reads as grey (beige and shaded skin stay above it).
    public static let greyChroma = 0.03

    /// Cells on a smooth gradient, where a few palette colours would band: the lightness steps
    /// to the 4 neighbours are all small and not all flat, and the lightness runs on straight
    /// through the cell (along each axis the step in equals the step out, within half the
    /// steepest step). Flat areas (a clear sky), edges and textures (grass, a knitted jumper,
    /// whose small steps go up and down from cell to cell) are not dithered (issue 38:
    /// checkerboards on flat skies, noise on low-contrast textures).
    public static func gradientCells(_ lab: [OKLab], width: Int) -> [Bool] {
        let height = lab.count / max(1, width)
        return lab.indices.map { i in
            let x = i % width, y = i / width
            var steepest = 0.0
            for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] where (0..<width).contains(x + dx) && (0..<height).contains(y + dy) {
                steepest = max(steepest, abs(lab[(y + dy) * width + x + dx].l - lab[i].l))
            }
            guard steepest > 0.012 && steepest < 0.06 else { return false }
            // The bend along each axis with a neighbour on both sides.
            var bend = 0.0
            if x > 0 && x + 1 < width { bend = max(bend, abs(lab[i - 1].l + lab[i + 1].l - 2 * lab[i].l)) }
            if y > 0 && y + 1 < height { bend = max(bend, abs(lab[i - width].l + lab[i + width].l - 2 * lab[i].l)) }
            return bend <= steepest / 2
        }
    }

    /// Each centre as vivid as the points nearest it: its hue and lightness kept, its chroma the
    /// (weighted) mean of theirs, then into sRGB's gamut. A centre is a mean, and the mean of
    /// colours of different hues is greyer than each of them: k-means alone took about a tenth of
    /// the picture's chroma (issue 29's chroma measure on photos of people: 1.15× became 1.25×).
    public static func vivid(_ centres: [OKLab], _ points: [OKLab], weights: [Double]? = nil) -> [OKLab] {
        var chroma = [Double](repeating: 0, count: centres.count), counts = chroma
        // Each point's nearest centre (the first of equals) in C (`OKLabKernels.nearest`).
        let nearest = OKLabKernels.nearest(points: OKLab.flat(points), centres: OKLab.flat(centres)).index
        for (i, p) in points.enumerated() {
            let best = nearest[i], w = weights?[i] ?? 1
            chroma[best] += w * p.chroma; counts[best] += w
        }
        var scaled = [Double](repeating: 0, count: 3 * centres.count)
        for (j, c) in centres.enumerated() {
            let own = c.chroma, scale = counts[j] > 0 && own > 1e-9 ? chroma[j] / counts[j] / own : 1
            (scaled[3 * j], scaled[3 * j + 1], scaled[3 * j + 2]) = (c.l, c.a * scale, c.b * scale)
        }
        // The gamut clip of the C kernel (OKLab.clippedToGamut's colours, all at once).
        return OKLab.interleaved(OKLabKernels.clippedToGamut(lab: scaled))
    }

    /// Cells of another colour than each of their 8 neighbours: hue and chroma (a, b) more than
    /// 0.15 apart (the outlier slot's distance). A small subject (a kite in the sky), not a
    /// darker or lighter shade of what is around it: not a stray of the ordered dither (one
    /// palette step of lightness), nor a dark gap in foliage. Border cells are not.
    public static func salientCells(_ lab: [OKLab], width: Int) -> [Bool] {
        let height = lab.count / max(1, width)
        var salient = [Bool](repeating: false, count: lab.count)
        guard width >= 3, height >= 3 else { return salient }
        for y in 1..<(height - 1) {
            for x in 1..<(width - 1) {
                let c = lab[y * width + x]
                var apart = true
                for dy in -1...1 { for dx in -1...1 where dx != 0 || dy != 0 {
                    let n = lab[(y + dy) * width + x + dx], da = c.a - n.a, db = c.b - n.b
                    apart = apart && da * da + db * db > 0.15 * 0.15
                } }
                salient[y * width + x] = apart
            }
        }
        return salient
    }

    /// The point farthest from every centre, when it is farther than 0.15 (OKLab ΔE) from
    /// all of them: a small, bright subject k-means would merge into a bigger group.
    static func outlier(_ points: [OKLab], _ centres: [OKLab]) -> OKLab? {
        var best: OKLab?, bestDistance = 0.15 * 0.15
        // Each point's distance from its nearest centre, in C (`OKLabKernels.nearest`).
        let nearest = OKLabKernels.nearest(points: OKLab.flat(points), centres: OKLab.flat(centres)).distance
        for (i, p) in points.enumerated() where nearest[i] > bestDistance { bestDistance = nearest[i]; best = p }
        return best
    }

    /// `k` colours for `points`: median cut (split the box with the largest extent × count at
    /// the median of its widest axis) gives the seeds, then Lloyd's k-means refines them.
    /// Deterministic: every sort breaks ties by position.
    ///
    /// The points are held a component per array, each box's extent is measured once, when
    /// it is made, and Lloyd's rounds run in C; every sum and comparison is the one of the
    /// plain Swift version (kept in the tests as the reference), so the palette is bit for
    /// bit the same.
    public static func kMeans(_ points: [OKLab], k: Int, iterations: Int = 10) -> [OKLab] {
        let count = points.count
        var pl = [Double](repeating: 0, count: count), pa = pl, pb = pl
        for i in 0..<count { pl[i] = points[i].l; pa[i] = points[i].a; pb[i] = points[i].b }
        func extent(_ box: [Int]) -> (axis: Int, range: Double) {
            // The three axes in one pass over the box (the same min and max of each, and
            // the same comparisons between their ranges, as an axis at a time).
            var lowL = Double.infinity, highL = -Double.infinity, lowA = lowL, highA = highL, lowB = lowL, highB = highL
            for i in box {
                lowL = min(lowL, pl[i]); highL = max(highL, pl[i])
                lowA = min(lowA, pa[i]); highA = max(highA, pa[i])
                lowB = min(lowB, pb[i]); highB = max(highB, pb[i])
            }
            var best = (axis: 0, range: -1.0)
            if highL - lowL > best.range { best = (0, highL - lowL) }
            if highA - lowA > best.range { best = (1, highA - lowA) }
            if highB - lowB > best.range { best = (2, highB - lowB) }
            return best
        }
        // Each box's points ordered as the plain version left them (by the axis of the box's
        // last split, then by position; the first box by position): only the centres' sums
        // see that order, so a split only selects its halves (`medianSplit`, a linear pass
        // where a sort was n log n) and each final box is sorted once, for its sum.
        var boxes = [Array(points.indices)], orders = [-1]
        var extents = [extent(boxes[0])]
        func axisValues(_ axis: Int) -> [Double] { axis == 0 ? pl : axis == 1 ? pa : pb }
        while boxes.count < k {
            var chosen = -1, score = 0.0
            for i in boxes.indices where boxes[i].count > 1 {
                let s = extents[i].range * Double(boxes[i].count)
                if s > score { score = s; chosen = i }
            }
            guard chosen >= 0 else { break }
            let axis = extents[chosen].axis
            // The halves at the median of the axis's values, ties by position (a total order).
            let (lower, upper) = OKLabKernels.medianSplit(boxes[chosen], by: axisValues(axis))
            boxes[chosen] = lower
            orders[chosen] = axis
            extents[chosen] = extent(lower)
            boxes.append(upper)
            orders.append(axis)
            extents.append(extent(upper))
        }
        var centres = [Double]()
        centres.reserveCapacity(3 * boxes.count)
        for (j, unordered) in boxes.enumerated() {
            let box = orders[j] < 0 ? unordered : OKLabKernels.sortedBox(unordered, by: axisValues(orders[j]))
            var sl = 0.0, sa = 0.0, sb = 0.0
            for i in box { sl += pl[i]; sa += pa[i]; sb += pb[i] }
            let n = Double(box.count)
            centres += [sl / n, sa / n, sb / n]
        }
        // Lloyd's rounds in C (`snap_kmeans_refine`): nearest centre per point (first of
        // equals), sums in point order, a centre without points kept.
        return OKLab.interleaved(OKLabKernels.kMeansRefine(l: pl, a: pa, b: pb, centres: centres, iterations: iterations))
    }
}

/// Palette indices: how often each is used, and the palette cut to the colours used.
public enum PaletteIndices {
    public static func histogram(_ indices: [UInt8], count: Int) -> [Int] {
        var h = [Int](repeating: 0, count: count)
        for i in indices { h[Int(i)] += 1 }
        return h
    }

    /// Drops colours no pixel uses, so the PNG's palette is exactly the image's colours.
    public static func compacted(width: Int, height: Int, palette: [Colour], indices: [UInt8]) -> IndexedImage {
        let used = histogram(indices, count: palette.count)
        var newIndex = [UInt8](repeating: 0, count: palette.count)
        var compact: [Colour] = []
        for (i, n) in used.enumerated() where n > 0 {
            newIndex[i] = UInt8(compact.count)
            compact.append(palette[i])
        }
        return IndexedImage(width: width, height: height, palette: compact, indices: indices.map { newIndex[Int($0)] })
    }

}

extension Colour {
    /// Rec. 601 luma, for ordering palettes.
    public var luma: Int { 299 * Int(red) + 587 * Int(green) + 114 * Int(blue) }
}

extension IndexedImage {
    /// The image without isolated dark cells (issue 38): a cell whose colour is more than
    /// `threshold` darker (OKLab L) than every one of its 8 neighbours takes the colour most of
    /// them have (the first such, in reading order, on a tie). Applied after the palette, where
    /// k-means and the dither made speckles the grid had not. Border cells are left alone.
    /// With `lightToo` (retro, whose fixed palette has no slot for a highlight) a lone cell of
    /// a colour none of its 8 neighbours has goes as well, lighter or darker: a dither's stray
    /// yellow on grass. A cell of `keep` stays either way (`OKLabQuantizer.salientCells`: a kite
    /// in the sky, lighter or darker than it, keeps its colour).
    public func withoutIsolatedDark(threshold: Double = 0.06, lightToo: Bool = false, keep: [Bool] = []) -> IndexedImage {
        let lightness = palette.map { OKLab($0).l }
        var out = indices
        guard width >= 3, height >= 3 else { return self }
        // The 8 neighbours' offsets, rows top to bottom, columns left to right.
        let around = [-width - 1, -width, -width + 1, -1, 1, width - 1, width, width + 1]
        for y in 1..<(height - 1) {
            for x in 1..<(width - 1) {
                let at = y * width + x, own = Int(indices[at]), l = lightness[own]
                // First whether the cell goes at all (most do not), without allocating.
                var darkest = Double.infinity, shared = false, allFar = true
                for offset in around {
                    let j = Int(indices[at + offset]), lj = lightness[j]
                    darkest = min(darkest, lj)
                    shared = shared || j == own
                    allFar = allFar && abs(lj - l) > threshold
                }
                let lone = lightToo && !shared && allFar
                if (darkest - l > threshold || lone) && !(keep.count == indices.count && keep[y * width + x]) {
                    var counts = [Int](repeating: 0, count: palette.count), order: [Int] = []
                    for dy in -1...1 { for dx in -1...1 where dx != 0 || dy != 0 {
                        let j = Int(indices[(y + dy) * width + x + dx])
                        if counts[j] == 0 { order.append(j) }
                        counts[j] += 1
                    } }
                    out[y * width + x] = UInt8(order.max { counts[$0] < counts[$1] || (counts[$0] == counts[$1] && order.firstIndex(of: $0)! > order.firstIndex(of: $1)!) }!)
                }
            }
        }
        return PaletteIndices.compacted(width: width, height: height, palette: palette, indices: out)
    }
}
