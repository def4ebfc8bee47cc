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
            // The faces in cell units, from the upright decoded image's pixels via the square.
            let faces = snap.placement.map { p in snap.faces.map { f in
                DrawnGrid.FaceCells(x0: (f.x - Double(p.left)) / Double(p.side) * Double(grid), y0: (f.y - Double(p.top)) / Double(p.side) * Double(grid),
                                    x1: (f.x + f.width - Double(p.left)) / Double(p.side) * Double(grid),
                                    y1: (f.y + f.height - Double(p.top)) / Double(p.side) * Double(grid))
            } } ?? []
            snap.grid = DrawnGrid.cells(rgb: source, side: 4 * grid, factor: 4, lift: lift, faces: faces)
            // The skin colour the palette keeps a slot for: the face cells' most common colour
            // (the one skin tone DrawnGrid gives the face; the first of equals).
            let inFace = DrawnGrid.FaceCells.mask(faces, side: grid)
            var counts: [Colour: Int] = [:], order: [Colour] = []
            for i in inFace.indices where inFace[i] {
                let c = Colour(red: snap.grid[3 * i], green: snap.grid[3 * i + 1], blue: snap.grid[3 * i + 2])
                if counts[c] == nil { order.append(c) }
                counts[c, default: 0] += 1
            }
            snap.skin = order.max { counts[$0]! < counts[$1]! }
            snap.faceCells = inFace.contains(true) ? inFace : []
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
