/// Where a square cut from an image keeps its faces (issue 38): all of them when they fit in
/// one square, else the largest; centred on them, moved only as far as the image allows.
public enum FaceSquare {
    /// The top-left corner of the `short`×`short` square of a `width`×`height` image (short =
    /// the shorter side) that keeps `faces`, or nil when there are none. Along the short side
    /// the square is the whole image; along the long side it is centred on the faces' extent
    /// (all faces when that fits in `short`, else the largest face: the biggest area, then
    /// the best score, then the first), clamped to the image. Whole pixels, so the same
    /// faces give the same square.
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
