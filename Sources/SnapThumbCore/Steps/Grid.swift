extension PipelineStep {
    /// The pixel-art grid: each cell stands for a 4×4 block of a square crop made the
    /// same way as square100 (that very crop when it is 4 × grid wide): the block's
    /// mean in the `soft` style, its representative colour, shaped, in `drawn` and `retro`
    /// (`DrawnGrid`).
    static let grid = PipelineStep(name: "grid") { snap in
        let grid = snap.settings.pixel.grid, side = snap.settings.square.size
        let source = 4 * grid == side
            ? snap.square
            : try squarePixels(snap, side: 4 * grid)
        if let lift = snap.settings.pixel.style.lift {
            snap.grid = DrawnGrid.cells(rgb: source, side: 4 * grid, factor: 4, lift: lift)
        } else {
            snap.grid = boxShrink(rgb: source, side: 4 * grid, factor: 4)
        }
    }
}

extension Settings.PixelStyle {
    /// The lift of the style's grid (`DrawnGrid`); nil for `soft` (block means, no lift).
    var lift: DrawnGrid.Lift? {
        switch self {
        case .soft: return nil
        case .drawn: return .drawn
        case .retro: return .retro
        }
    }
}

/// Each output pixel is the rounded mean of a `factor`×`factor` block of packed RGB.
func boxShrink(rgb: [UInt8], side: Int, factor: Int) -> [UInt8] {
    let out = side / factor
    let area = factor * factor
    var result = [UInt8](repeating: 0, count: out * out * 3)
    for y in 0..<out {
        for x in 0..<out {
            for band in 0..<3 {
                var sum = 0
                for dy in 0..<factor {
                    let row = (y * factor + dy) * side
                    for dx in 0..<factor { sum += Int(rgb[(row + x * factor + dx) * 3 + band]) }
                }
                result[(y * out + x) * 3 + band] = UInt8((sum + area / 2) / area)
            }
        }
    }
    return result
}
