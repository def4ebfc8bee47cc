internal import CKernelShim

/// The drawn pixel art's hot loops, in C (`oklab.c`): OKLab of every pixel of the
/// square, each cell's representative colour, and the k-means of the palette. The
/// same operations in the same order as SnapThumbCore's Swift (`OKLab`, `DrawnGrid`,
/// `OKLabQuantizer`, kept there as the reference and compared in the tests), so the
/// results are bit for bit the same; colours travel as interleaved l, a, b.
public enum OKLabKernels {
    /// l, a, b of each pixel of packed 8-bit sRGB; `linearTable` is the 256-entry
    /// sRGB-to-linear table.
    public static func image(rgb: [UInt8], linearTable: [Double]) -> [Double] {
        precondition(linearTable.count == 256, "the table has an entry per 8-bit value")
        let count = rgb.count / 3
        return [Double](unsafeUninitializedCapacity: count * 3) { buffer, initialized in
            rgb.withUnsafeBufferPointer { input in
                linearTable.withUnsafeBufferPointer { table in
                    if count > 0 { snap_oklab_image(input.baseAddress, count, table.baseAddress, buffer.baseAddress) }
                }
            }
            initialized = count * 3
        }
    }

    /// Each `factor`×`factor` block's representative colour of a `side`×`side` OKLab image.
    public static func drawnCells(lab: [Double], side: Int, factor: Int) -> [Double] {
        precondition(factor > 0 && lab.count >= side * side * 3, "the image holds side × side colours")
        let n = side / factor
        var scratch = [Double](repeating: 0, count: 4 * factor * factor)
        return [Double](unsafeUninitializedCapacity: n * n * 3) { buffer, initialized in
            lab.withUnsafeBufferPointer { input in
                scratch.withUnsafeMutableBufferPointer { s in
                    if n > 0 { snap_drawn_cells(input.baseAddress, Int32(side), Int32(factor), s.baseAddress, buffer.baseAddress) }
                }
            }
            initialized = n * n * 3
        }
    }

    /// `OKLab.clippedToGamut` of each interleaved l, a, b colour.
    public static func clippedToGamut(lab: [Double]) -> [Double] {
        let count = lab.count / 3
        return [Double](unsafeUninitializedCapacity: count * 3) { buffer, initialized in
            lab.withUnsafeBufferPointer { input in
                if count > 0 { snap_gamut_clip(input.baseAddress, count, buffer.baseAddress) }
            }
            initialized = count * 3
        }
    }

    /// Lloyd's k-means over the points with components `l`, `a`, `b` from `centres`
    /// (interleaved l, a, b), at most `iterations` rounds.
    public static func kMeansRefine(l: [Double], a: [Double], b: [Double], centres: [Double], iterations: Int) -> [Double] {
        let count = l.count, k = centres.count / 3
        precondition(a.count == count && b.count == count, "one l, a and b per point")
        guard count > 0, k > 0 else { return centres }
        var centres = centres
        var scratch = [Int](repeating: 0, count: 2 * count + k)
        var work = [Double](repeating: 0, count: count + 3 * k)
        l.withUnsafeBufferPointer { pl in
            a.withUnsafeBufferPointer { pa in
                b.withUnsafeBufferPointer { pb in
                    centres.withUnsafeMutableBufferPointer { c in
                        scratch.withUnsafeMutableBufferPointer { s in
                            work.withUnsafeMutableBufferPointer { w in
                                snap_kmeans_refine(pl.baseAddress, pa.baseAddress, pb.baseAddress, count, c.baseAddress, Int32(k),
                                                   Int32(iterations), s.baseAddress, w.baseAddress)
                            }
                        }
                    }
                }
            }
        }
        return centres
    }

    /// The nearest of the interleaved `centres` to each interleaved point (the first of equal
    /// squared distances, as a loop over the centres in order keeps it): its index and its
    /// squared distance (index 0 and infinity when there are no centres).
    public static func nearest(points: [Double], centres: [Double]) -> (index: [Int], distance: [Double]) {
        let count = points.count / 3, k = centres.count / 3
        var index = [Int](repeating: 0, count: count), distance = [Double](repeating: .infinity, count: count)
        guard count > 0 else { return (index, distance) }
        points.withUnsafeBufferPointer { p in
            centres.withUnsafeBufferPointer { c in
                index.withUnsafeMutableBufferPointer { i in
                    distance.withUnsafeMutableBufferPointer { d in
                        snap_nearest(p.baseAddress, count, c.baseAddress, Int32(k), i.baseAddress, d.baseAddress)
                    }
                }
            }
        }
        return (index, distance)
    }

    /// `box` (indices into `values`) sorted by `values[index]`, then by the index: the order
    /// of the palette's median cut. The values must be finite.
    public static func sortedBox(_ box: [Int], by values: [Double]) -> [Int] {
        let n = box.count
        guard n > 1 else { return box }
        precondition(box.allSatisfy { values.indices.contains($0) }, "the box holds indices of values")
        var box = box
        var keys = [Double](repeating: 0, count: 2 * n), spare = [Int](repeating: 0, count: n)
        values.withUnsafeBufferPointer { v in
            box.withUnsafeMutableBufferPointer { b in
                keys.withUnsafeMutableBufferPointer { k in
                    spare.withUnsafeMutableBufferPointer { s in
                        snap_sort_box(v.baseAddress, b.baseAddress, n, k.baseAddress, k.baseAddress! + n, s.baseAddress)
                    }
                }
            }
        }
        return box
    }

    /// `box` (indices into `values`) split in two at its median in the order of `sortedBox`:
    /// the first `box.count / 2` indices of that order and the rest, each in no particular order.
    public static func medianSplit(_ box: [Int], by values: [Double]) -> (lower: [Int], upper: [Int]) {
        let n = box.count, half = n / 2
        guard n > 1 else { return ([], box) }
        precondition(box.allSatisfy { values.indices.contains($0) }, "the box holds indices of values")
        var box = box
        var keys = [Double](repeating: 0, count: n)
        values.withUnsafeBufferPointer { v in
            box.withUnsafeMutableBufferPointer { b in
                keys.withUnsafeMutableBufferPointer { k in snap_select_box(v.baseAddress, b.baseAddress, n, half, k.baseAddress) }
            }
        }
        return (Array(box[..<half]), Array(box[half...]))
    }

    /// Each `factor`×`factor` block's rounded mean of `side`×`side` packed 8-bit RGB.
    public static func areaMeans(rgb: [UInt8], side: Int, factor: Int) -> [UInt8] {
        precondition(factor > 0 && rgb.count >= side * side * 3, "the image holds side × side pixels")
        let n = side / factor
        return [UInt8](unsafeUninitializedCapacity: n * n * 3) { buffer, initialized in
            rgb.withUnsafeBufferPointer { input in
                if n > 0 { snap_area_means(input.baseAddress, Int32(side), Int32(factor), buffer.baseAddress) }
            }
            initialized = n * n * 3
        }
    }
}
