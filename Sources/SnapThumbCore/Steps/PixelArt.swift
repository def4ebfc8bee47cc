import VipsKit
import SystemKit

extension PipelineStep {
    /// pixel25 and pixel100: the grid quantised to its palette, both PNGs within
    /// their budgets (fewer colours, then more effort, when they do not fit).
    static let pixelArt = PipelineStep(name: "pixel art") { snap in
        let pixel = snap.settings.pixel
        let art = try PixelArtStep.run(rgb: snap.grid, grid: pixel.grid, settings: pixel, mode: snap.settings.budgetMode,
                                       reserved: snap.skin.map { [$0] } ?? [], faces: snap.faceCells)
        for (name, fitted, side, budget) in [("pixel25", art.grid, pixel.grid, pixel.gridBudget),
                                             ("pixel100", art.large, pixel.grid * pixel.scale, pixel.budget)] {
            snap.encoded.append(EncodedVariant(name: name, fitted: fitted, mediaType: "image/png", side: side, budget: budget,
                                               colours: art.colours, palette: pixel.effectivePalette.label, dither: pixel.effectiveDither))
        }
    }
}

/// The pixel-art pair: the grid image (`pixel25`) and its nearest-neighbour
/// enlargement (`pixel100`), sharing one palette so their colours are identical.
struct PixelArt {
    var grid: Fitted
    var large: Fitted
    var colours: Int
}

enum PixelArtStep {
    /// Quantises `rgb` (grid × grid, packed sRGB) and encodes both PNGs within
    /// their budgets: fewer colours first, then more compression effort, then `budget`.
    /// `reserved`: colours an adaptive OKLab palette keeps (the faces' skin); `faces`: which
    /// cells are in a face (an adaptive OKLab palette counts them `faceWeight` times).
    static func run(rgb: [UInt8], grid: Int, settings: Settings.PixelSettings, mode: Settings.BudgetMode,
                    reserved: [Colour] = [], faces: [Bool] = []) throws -> PixelArt {
        let gridBudget = settings.gridBudget.map { Budget(limit: $0, mode: mode) }
        let largeBudget = settings.budget.map { Budget(limit: $0, mode: mode) }
        var encodes = (grid: 0, large: 0)
        var last: (grid: Int, large: Int) = (0, 0)

        let palette = settings.effectivePalette
        let wanted = min(settings.colours, palette.fixedColours?.count ?? 256)
        // Speckles go after the palette (and in retro lone cells, the dither's strays), but not a
        // small subject of another colour than all around it (a kite).
        let lab = settings.style == .soft ? [] : OKLab.image(rgb: rgb)
        let salient = settings.style == .soft ? [] : OKLabQuantizer.salientCells(lab, width: grid)
        for count in colourLadder(from: wanted) {
            let image = settings.style == .soft
                ? try Quantizer.indexed(rgb: rgb, width: grid, height: grid, colours: count, fixed: palette.fixedColours, dither: settings.dither)
                : OKLabQuantizer.indexed(rgb: rgb, width: grid, height: grid, colours: count, fixed: palette.fixedColours,
                                         ordered: settings.effectiveDither, reserved: reserved, faces: faces, lab: lab)
                    .withoutIsolatedDark(lightToo: settings.style == .retro, keep: salient)
            let large = image.scaled(by: settings.scale)
            for effort in count == 2 ? [PalettePNG.Effort.normal, .max] : [.normal] {
                let gridPNG = try PalettePNG.encode(image, effort: effort)
                let largePNG = try PalettePNG.encode(large, effort: effort, enlarged: settings.scale > 1)
                encodes.grid += 1
                encodes.large += 1
                last = (gridPNG.count, largePNG.count)
                if gridBudget?.fits(gridPNG.count) ?? true, largeBudget?.fits(largePNG.count) ?? true {
                    let degraded = count < wanted || effort == .max
                    return PixelArt(
                        grid: Fitted(bytes: gridPNG, quality: nil, encodes: encodes.grid, degraded: degraded),
                        large: Fitted(bytes: largePNG, quality: nil, encodes: encodes.large, degraded: degraded),
                        colours: image.palette.count)
                }
            }
        }
        throw SnapError(.budget, "even with 2 colours the pixel-art PNGs are \(last.grid) and \(last.large) bytes, over their budgets of \(settings.gridBudget.map(String.init) ?? "none") and \(settings.budget.map(String.init) ?? "none") (\(mode.rawValue) mode)")
    }

    /// 16 → 12 → 9 → 6 → 4 → 2: each step drops about a quarter of the colours.
    static func colourLadder(from start: Int) -> [Int] {
        var steps = [max(2, start)]
        while let last = steps.last, last > 2 {
            steps.append(max(2, min(last - 1, last * 3 / 4)))
        }
        return steps
    }
}
