import Foundation
import VipsKit

extension PipelineStep {
    /// square100: a JPEG quality up to the range's top that fills the budget
    /// (inline: the push payload's room, see `Settings.squareBudget`).
    static let encodeWithinBudget = PipelineStep(name: "encode within budget") { snap in
        let square = snap.settings.square, rgb = snap.square, limit = snap.settings.squareBudget
        let jpeg = try JPEGBudgetSearch.fitSquare(rgb: rgb, side: square.size, settings: square,
                                                  budget: limit.map { Budget(limit: $0, mode: snap.settings.budgetMode) })
        snap.encoded.append(EncodedVariant(name: "square100", fitted: jpeg, mediaType: "image/jpeg", side: square.size,
                                           budget: limit))
    }
}

/// A byte budget: how large an encoded variant may be.
public struct Budget: Sendable, Equatable {
    public var limit: Int
    public var mode: Settings.BudgetMode

    public init(limit: Int, mode: Settings.BudgetMode) {
        self.limit = limit
        self.mode = mode
    }

    /// Base64 length of `n` bytes (with padding), which is what counts inside a push payload.
    public static func base64Length(_ n: Int) -> Int { (n + 2) / 3 * 4 }

    /// The measure that is held against `limit`.
    public func measure(_ bytes: Int) -> Int { mode == .inline ? Budget.base64Length(bytes) : bytes }
    public func fits(_ bytes: Int) -> Bool { measure(bytes) <= limit }
}

/// The result of fitting one variant into its budget.
struct Fitted {
    var bytes: [UInt8]
    /// JPEG quality used (nil for PNG).
    var quality: Int?
    var encodes: Int
    /// True when the variant had to leave its normal range to fit.
    var degraded: Bool
}

/// Finds a JPEG quality whose encoding fills most of a budget without going
/// over it, in few encodes (about two on average).
///
/// JPEG size against quality has a typical shape: `Model.shape` is the mean of
/// ln(size(q) / size(90)) over 120 real 100 px snaps (`Scripts/make-corpus.sh`,
/// optimised Huffman, one table per chroma layout, measured beyond 90 one
/// quality at a time because the curve steepens there: quality 99 → 100 adds
/// about a quarter). The first guess comes from the pixels: ln size(90) is
/// predicted from the mean luma and chroma differences between neighbouring
/// pixels (fitted on those snaps and the 13 sample photos in Samples/ together;
/// residual ±0.1 in ln size), so the first encode usually lands near the target. Each later guess fits
/// `ln size = a + b · shape(q)` through the nearest fitting and failing encodes
/// seen so far (one point: b = 1) and solves it for the target. The search stops
/// as soon as an encode fits and fills at least `fill` of the budget (or is the
/// range's top, or its neighbour one quality up does not fit). The path depends
/// only on the pixels, so the answer is deterministic.
enum JPEGBudgetSearch {
    /// An encode that fits and reaches this share of the budget ends the search
    /// (0.93 per image gives a mean fill of 96–97 % in under two encodes on average;
    /// README: Budget search).
    static let fill = 0.94
    /// Guesses aim this far under the budget: a miss by the model's typical
    /// error then still fits, and still fills.
    static let aim = 0.985

    /// The size model for one chroma layout.
    struct Model: Sendable {
        /// Qualities at which `shapeTable` is measured.
        static let points: [Double] = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85,
                                       90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100]
        /// ln(size(q) / size(90)) at `points` (measured; see above).
        let shapeTable: [Double]
        /// ln size(90) of a 100×100 square ≈ c0 + c1 · ln(mean luma step) + c2 · ln(mean chroma step).
        let prior: (c0: Double, luma: Double, chroma: Double)

        static let c444 = Model(
            shapeTable: [-2.301, -1.980, -1.735, -1.562, -1.417, -1.301, -1.200, -1.117, -1.045, -0.975, -0.902, -0.838,
                         -0.752, -0.665, -0.552, -0.400, -0.243, 0.000, 0.040, 0.100, 0.194, 0.282, 0.340, 0.534,
                         0.641, 0.799, 0.985, 1.153],
            prior: (7.0465, 0.5331, 0.2491))
        static let c420 = Model(
            shapeTable: [-2.112, -1.799, -1.569, -1.407, -1.274, -1.168, -1.076, -1.000, -0.934, -0.870, -0.804, -0.745,
                         -0.667, -0.587, -0.486, -0.351, -0.212, 0.000, 0.037, 0.089, 0.170, 0.248, 0.299, 0.463,
                         0.558, 0.699, 0.862, 1.015],
            prior: (6.8444, 0.5721, 0.1234))

        static func of(_ chroma: JPEG.Chroma) -> Model { chroma == .c444 ? .c444 : .c420 }

        /// The typical curve at any quality (linear between the table's points, extended at the ends).
        func shape(_ q: Double) -> Double {
            let points = Model.points
            var i = 0
            while i < points.count - 2 && q > points[i + 1] { i += 1 }
            let t = (q - points[i]) / (points[i + 1] - points[i])
            return shapeTable[i] + t * (shapeTable[i + 1] - shapeTable[i])
        }

        /// The quality whose shape value is `value` (the curve is increasing).
        func inverseShape(_ value: Double) -> Double {
            var low = -40.0, high = 140.0
            for _ in 0..<40 {
                let mid = (low + high) / 2
                if shape(mid) < value { low = mid } else { high = mid }
            }
            return low
        }

        /// Predicted ln size(90) of packed RGB `side`×`side` pixels.
        func predictedLogSize90(rgb: [UInt8], side: Int) -> Double {
            var luma = 0, chroma = 0
            rgb.withUnsafeBufferPointer { p in
                @inline(__always) func y(_ i: Int) -> Int { (77 * Int(p[i]) + 150 * Int(p[i + 1]) + 29 * Int(p[i + 2])) >> 8 }
                @inline(__always) func step(_ i: Int, _ j: Int) {
                    let yi = y(i), yj = y(j)
                    luma += abs(yi - yj)
                    chroma += abs((Int(p[i + 2]) - yi) - (Int(p[j + 2]) - yj)) + abs((Int(p[i]) - yi) - (Int(p[j]) - yj))
                }
                for row in 0..<side {
                    for column in 0..<side {
                        let i = (row * side + column) * 3
                        if column + 1 < side { step(i, i + 3) }
                        if row + 1 < side { step(i, i + side * 3) }
                    }
                }
            }
            let pairs = Double(max(1, 2 * side * (side - 1)))
            let area = log(Double(side * side) / 10_000)
            // + 0.3: grey images have no chroma steps at all.
            return prior.c0 + area + prior.luma * log(Double(luma) / pairs + 0.3)
                + prior.chroma * log(Double(chroma) / pairs + 0.3)
        }
    }

    /// The 4:2:0 model (the tests' synthetic size curves use it).
    static func shape(_ q: Double) -> Double { Model.c420.shape(q) }

    /// The first quality to try for `rgb` under `budget`, from the pixels alone.
    static func firstGuess(rgb: [UInt8], side: Int, chroma: JPEG.Chroma, budget: Budget) -> Int {
        let model = Model.of(chroma)
        let target = log(Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit) * aim)
        let predicted = model.inverseShape(target - model.predictedLogSize90(rgb: rgb, side: side))
        return Int(predicted.rounded(.down))
    }

    /// Qualities below `range` are searched the same way when nothing in it fits;
    /// the result is then marked degraded.
    /// - Parameter start: the first quality to encode (clamped to 1…the range's
    ///   top); the range's top when nil.
    static func fit(range: ClosedRange<Int>, budget: Budget?, model: Model = .c420, start: Int? = nil,
                    encode: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> [UInt8] { encodes += 1; return try encode(q) }

        guard let budget else {
            return Fitted(bytes: try run(range.upperBound), quality: range.upperBound, encodes: encodes, degraded: false)
        }
        // The largest byte count the budget allows.
        let allowed = Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit)
        let target = log(allowed * aim)

        var fail: (q: Int, size: Int)?
        var fit: (q: Int, bytes: [UInt8])?
        var guess = min(max(start ?? range.upperBound, 1), range.upperBound)
        while true {
            let bytes = try run(guess)
            if budget.fits(bytes.count) { fit = (guess, bytes) } else { fail = (guess, bytes.count) }

            if let fit, fit.q == range.upperBound || Double(fit.bytes.count) >= fill * allowed { break }
            let low = fit?.q ?? 0
            let high = fail?.q ?? (range.upperBound + 1)
            if high - low <= 1 { break }

            // Fit the model through the nearest points and solve it for the target.
            var slope = 1.0
            let reference: (q: Int, size: Int)
            if let fit, let fail {
                let spread = model.shape(Double(fail.q)) - model.shape(Double(fit.q))
                if spread > 0 { slope = max(0.2, (log(Double(fail.size)) - log(Double(fit.bytes.count))) / spread) }
                reference = fail
            } else if let fail {
                reference = fail
            } else {
                reference = (fit!.q, fit!.bytes.count)
            }
            let offset = log(Double(reference.size)) - slope * model.shape(Double(reference.q))
            let predicted = model.inverseShape((target - offset) / slope)
            guess = min(max(Int(predicted.rounded(.down)), low + 1), high - 1)
        }
        if let fit { return Fitted(bytes: fit.bytes, quality: fit.q, encodes: encodes, degraded: fit.q < range.lowerBound) }
        throw SnapError(.budget, "even at JPEG quality 1 the thumbnail is \(fail!.size) bytes, over its budget of \(budget.limit) (\(budget.mode.rawValue) mode)")
    }

    /// square100's search: the first guess from the pixels, the model of its chroma layout.
    static func fitSquare(rgb: [UInt8], side: Int, settings: Settings.SquareSettings, budget: Budget?) throws -> Fitted {
        let start = budget.map { firstGuess(rgb: rgb, side: side, chroma: settings.chroma, budget: $0) }
        return try fit(range: settings.qualityMin...settings.qualityMax, budget: budget, model: .of(settings.chroma), start: start,
                       encode: { try JPEG.encode(rgb: rgb, width: side, height: side, quality: $0, chroma: settings.chroma) })
    }
}
