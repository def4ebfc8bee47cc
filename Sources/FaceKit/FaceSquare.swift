/// Where a square cut from an image keeps its faces (issue 38): all of them when they fit in
/// one square, else the largest and as many others as fit with it; centred on them, moved
/// only as far as the image allows.
public enum FaceSquare {
    /// The top-left corner of the `short`×`short` square of a `width`×`height` image (short =
    /// the shorter side) that keeps `faces`, or nil when there are none. Along the short side
    /// the square is the whole image; along the long side it is centred on the faces' extent:
    /// all faces when that fits in `short`, else the largest face (the biggest area, then the
    /// best score, then the first) with as many of the others as fit beside it (then the most
    /// face area), clamped to the image. Whole pixels, so the same faces give the same square.
    public static func place(faces: [FaceBox], width: Int, height: Int) -> (left: Int, top: Int, side: Int)? {
        guard !faces.isEmpty, width > 0, height > 0 else { return nil }
        let side = min(width, height), long = max(width, height)
        let horizontal = width > height
        func span(_ f: FaceBox) -> (Double, Double) { horizontal ? (f.x, f.x + f.width) : (f.y, f.y + f.height) }
        var low = faces.map { span($0).0 }.min()!, high = faces.map { span($0).1 }.max()!
        if high - low > Double(side) {
            var largest = faces[0]
            for f in faces.dropFirst() where f.area > largest.area || (f.area == largest.area && f.score > largest.score) { largest = f }
            (low, high) = span(largest)
            // Windows of the square's length starting at each face: the one holding the
            // largest face and the most others wins.
            var best = (count: 1, area: largest.area)
            for start in faces.map({ span($0).0 }).sorted() {
                let end = start + Double(side)
                let inWindow = faces.filter { span($0).0 >= start && span($0).1 <= end }
                guard inWindow.contains(largest) else { continue }
                let area = inWindow.reduce(0) { $0 + $1.area }
                if inWindow.count > best.count || (inWindow.count == best.count && area > best.area) {
                    best = (inWindow.count, area)
                    low = inWindow.map { span($0).0 }.min()!
                    high = inWindow.map { span($0).1 }.max()!
                }
            }
        }
        let start = ((low + high) / 2 - Double(side) / 2).rounded()
        let offset = Int(min(Double(long - side), max(0, start)))
        return horizontal ? (offset, 0, side) : (0, offset, side)
    }

    /// How much of `face` lies inside the square at (`left`, `top`) of side `side`, 0…1.
    public static func inside(_ face: FaceBox, left: Double, top: Double, side: Double) -> Double {
        guard face.area > 0 else { return 0 }
        let w = max(0, min(face.x + face.width, left + side) - max(face.x, left))
        let h = max(0, min(face.y + face.height, top + side) - max(face.y, top))
        return w * h / face.area
    }
}
