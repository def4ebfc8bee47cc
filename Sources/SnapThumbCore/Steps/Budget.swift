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
/// about a quarter). The first guess comes from the pixels: ln size at each
/// quality of the table is predicted from mean luma and chroma differences and
/// luma second differences between neighbouring pixels (`Model.sizeTable`, fitted
/// on those snaps and the sample photos together; residual about ±0.075 in ln
/// size), so the first encode usually lands near the target. Each later guess fits
/// `ln size = a + b · shape(q)` through the nearest fitting and failing encodes
/// seen so far (one point: b = 1) and solves it for the target. The search stops
/// as soon as an encode fits and fills at least `fill` of the budget (`laterFill`
/// once the first guess has missed), or is the range's top, or its neighbour one
/// quality up does not fit. The path depends
/// only on the pixels, so the answer is deterministic.
enum JPEGBudgetSearch {
    /// An encode that fits and reaches this share of the budget ends the search
    /// (with the pixel-based first guess: a mean fill of 95–97 % in 1.8–2.0 encodes on
    /// average on the corpus; docs/performance.md: Budget search).
    static let fill = 0.95
    /// After the first encode missed, an encode that fits and reaches this share ends
    /// the search: another encode would cost more than the last few per cent fill.
    static let laterFill = 0.90
    /// Guesses aim this far under the budget: a miss by the model's typical
    /// error then still fits, and still fills.
    static let aim = 0.985
    /// The first guess aims lower: it comes from the pixels alone, and a first
    /// encode over the budget always costs a second.
    static let firstAim = 0.98
    /// Bytes one shared Huffman table pair saves against a luma and a chroma pair
    /// (the mean on the 120 corpus snaps at quality 70 and 90: 30.5 and 33).
    static let sharedHuffmanSaving = 31.0

    /// The size model for one chroma layout.
    struct Model: Sendable, SizeCurve {
        /// Qualities at which `shapeTable` is measured.
        static let points: [Double] = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85,
                                       90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100]
        /// ln(size(q) / size(90)) at `points` (measured; see above): the mean curve,
        /// which later guesses fit through the encodes seen.
        let shapeTable: [Double]
        /// ln size(q) of a 100×100 square at each of `points`, predicted from the pixels
        /// before any encode: c0 + c1 · ln(mean luma step) + c2 · ln(mean chroma step)
        /// + c3 · ln(mean luma second difference). One fit per quality (least squares over
        /// the 120 corpus snaps and the sample photos), because how steeply size falls
        /// below 90 differs from image to image: one fit at 90 moved along the mean curve
        /// missed ln size(50) by 0.15 (root mean square, on the corpus), these fits by 0.08.
        let sizeTable: [(c0: Double, luma: Double, chroma: Double, curvature: Double)]

        static let c444 = Model(
            shapeTable: [-2.301, -1.980, -1.735, -1.562, -1.417, -1.301, -1.200, -1.117, -1.045, -0.975, -0.902, -0.838,
                         -0.752, -0.665, -0.552, -0.400, -0.243, 0.000, 0.040, 0.100, 0.194, 0.282, 0.340, 0.534,
                         0.641, 0.799, 0.985, 1.153],
            sizeTable: [
                (5.6063, 0.4968, 0.1059, -0.3067),
                (5.5733, 0.6220, 0.2378, -0.3660),
                (5.6460, 0.5943, 0.3341, -0.3446),
                (5.7169, 0.5483, 0.3893, -0.3012),
                (5.8065, 0.4928, 0.4198, -0.2495),
                (5.8742, 0.4536, 0.4413, -0.2083),
                (5.9483, 0.4046, 0.4605, -0.1666),
                (6.0099, 0.3835, 0.4744, -0.1486),
                (6.0620, 0.3632, 0.4870, -0.1313),
                (6.1250, 0.3484, 0.4925, -0.1193),
                (6.1927, 0.3300, 0.4983, -0.1044),
                (6.2366, 0.3123, 0.5030, -0.0821),
                (6.3143, 0.2940, 0.5073, -0.0645),
                (6.3819, 0.2713, 0.5135, -0.0396),
                (6.5025, 0.2515, 0.5121, -0.0234),
                (6.6740, 0.2208, 0.5051, 0.0023),
                (6.8309, 0.1936, 0.4959, 0.0366),
                (7.1264, 0.1637, 0.4676, 0.0638),
                (7.1713, 0.1529, 0.4666, 0.0723),
                (7.2199, 0.1644, 0.4606, 0.0729),
                (7.3720, 0.1501, 0.4431, 0.0723),
                (7.4895, 0.1468, 0.4284, 0.0741),
                (7.5360, 0.1555, 0.4262, 0.0737),
                (7.8654, 0.1279, 0.3875, 0.0647),
                (8.0012, 0.1289, 0.3759, 0.0596),
                (8.2323, 0.1115, 0.3549, 0.0571),
                (8.5077, 0.1047, 0.3302, 0.0396),
                (8.7600, 0.1183, 0.3017, 0.0090)])
        static let c420 = Model(
            shapeTable: [-2.112, -1.799, -1.569, -1.407, -1.274, -1.168, -1.076, -1.000, -0.934, -0.870, -0.804, -0.745,
                         -0.667, -0.587, -0.486, -0.351, -0.212, 0.000, 0.037, 0.089, 0.170, 0.248, 0.299, 0.463,
                         0.558, 0.699, 0.862, 1.015],
            sizeTable: [
                (5.4658, 0.6072, 0.0335, -0.3597),
                (5.4681, 0.7960, 0.1092, -0.4472),
                (5.5751, 0.7634, 0.1736, -0.4151),
                (5.6493, 0.7258, 0.2069, -0.3661),
                (5.7418, 0.6660, 0.2234, -0.3038),
                (5.8051, 0.6258, 0.2356, -0.2554),
                (5.8721, 0.5899, 0.2493, -0.2217),
                (5.9310, 0.5682, 0.2568, -0.1993),
                (5.9808, 0.5530, 0.2644, -0.1833),
                (6.0385, 0.5348, 0.2690, -0.1680),
                (6.0967, 0.5138, 0.2721, -0.1474),
                (6.1415, 0.4950, 0.2741, -0.1240),
                (6.2096, 0.4768, 0.2783, -0.1062),
                (6.2787, 0.4523, 0.2818, -0.0810),
                (6.3835, 0.4268, 0.2811, -0.0582),
                (6.5286, 0.3877, 0.2839, -0.0295),
                (6.6605, 0.3483, 0.2865, 0.0091),
                (6.8910, 0.2918, 0.2830, 0.0555),
                (6.9285, 0.2782, 0.2848, 0.0662),
                (6.9713, 0.2762, 0.2837, 0.0744),
                (7.0851, 0.2646, 0.2763, 0.0747),
                (7.1811, 0.2505, 0.2718, 0.0825),
                (7.2155, 0.2551, 0.2719, 0.0867),
                (7.4726, 0.2293, 0.2530, 0.0795),
                (7.5842, 0.2209, 0.2490, 0.0824),
                (7.7836, 0.2014, 0.2383, 0.0801),
                (8.0178, 0.1881, 0.2236, 0.0689),
                (8.2616, 0.1875, 0.2010, 0.0431)])

        static func of(_ chroma: JPEG.Chroma) -> Model { chroma == .c444 ? .c444 : .c420 }

        /// The typical curve at any quality (linear between the table's points, extended at the ends).
        func shape(_ q: Double) -> Double { Model.interpolate(shapeTable, at: q) }

        /// `table` (values at `points`) at quality `q`: linear between points, extended at the ends.
        static func interpolate(_ table: [Double], at q: Double) -> Double {
            var i = 0
            while i < points.count - 2 && q > points[i + 1] { i += 1 }
            let t = (q - points[i]) / (points[i + 1] - points[i])
            return table[i] + t * (table[i + 1] - table[i])
        }

        /// The quality at which the increasing curve `curve` reaches `value`.
        static func inverse(_ value: Double, of curve: (Double) -> Double) -> Double {
            var low = -40.0, high = 140.0
            for _ in 0..<40 {
                let mid = (low + high) / 2
                if curve(mid) < value { low = mid } else { high = mid }
            }
            return low
        }

        /// The quality whose shape value is `value` (the curve is increasing).
        func inverseShape(_ value: Double) -> Double { Model.inverse(value, of: shape) }

        /// Predicted ln size at each of `points` for packed RGB `side`×`side` pixels.
        func predictedLogSizes(rgb: [UInt8], side: Int) -> [Double] {
            let f = PixelSteps(rgb: rgb, side: side)
            let area = log(Double(side * side) / 10_000)
            return sizeTable.map { $0.c0 + area + $0.luma * f.luma + $0.chroma * f.chroma + $0.curvature * f.curvature }
        }
    }

    /// What the size prediction reads from the pixels: ln(mean + 0.3) of the absolute
    /// luma and chroma (B − Y, R − Y) differences between neighbours, and of the luma
    /// second differences (2·y − left − right, and up/down), over rows and columns.
    /// (+ 0.3: grey images have no chroma steps at all.)
    struct PixelSteps {
        let luma: Double, chroma: Double, curvature: Double

        init(rgb: [UInt8], side: Int) {
            let (steps, chromaSteps, second) = Resample.neighbourSums(rgb: rgb, side: side)
            let pairs = Double(max(1, 2 * side * (side - 1))), triples = Double(max(1, 2 * side * (side - 2)))
            // Clamped to about the range the tables were fitted on: a grey square
            // (no chroma steps at all) is far outside it, and its size is not.
            luma = min(max(log(Double(steps) / pairs + 0.3), 0.7), 2.5)
            chroma = min(max(log(Double(chromaSteps) / pairs + 0.3), 0.6), 3.2)
            curvature = min(max(log(Double(second) / triples + 0.3), 0.25), 2.7)
        }
    }

    /// The 4:2:0 model (the tests' synthetic size curves use it).
    static func shape(_ q: Double) -> Double { Model.c420.shape(q) }

    /// The first quality to try for `rgb` under `budget`, from the pixels alone.
    static func firstGuess(rgb: [UInt8], side: Int, chroma: JPEG.Chroma, budget: Budget) -> Int {
        let predicted = Model.of(chroma).predictedLogSizes(rgb: rgb, side: side)
        // The size tables were fitted with a second (chroma) Huffman table pair in every
        // file; the encoder now shares one pair, which saves its header's bytes.
        let target = log(Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit) * firstAim + sharedHuffmanSaving)
        return Int(Model.inverse(target) { Model.interpolate(predicted, at: $0) }.rounded(.down))
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

        let search = QualitySearch(curve: model, bottom: 1, top: range.upperBound, firstFill: fill, laterFill: laterFill,
                                   slopes: 0.2...Double.infinity, quarterBracket: false)
        let outcome = try search.run(start: min(max(start ?? range.upperBound, 1), range.upperBound), allowed: allowed, target: target,
                                     fits: budget.fits, encode: run)
        let (fit, fail) = (outcome.fit, outcome.fail)
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

extension JPEGBudgetSearch.Model {
    /// Pipeline version 3's one-point prediction of ln size(90) of a 4:4:4 square (its
    /// coefficients whatever the model), kept as a measure of detail: the modern
    /// square's size model (`ModernSquare`) was fitted on it.
    func predictedLogSize90(rgb: [UInt8], side: Int) -> Double {
        let sums = Resample.neighbourSums(rgb: rgb, side: side)
        let pairs = Double(max(1, 2 * side * (side - 1)))
        let area = log(Double(side * side) / 10_000)
        return 7.0465 + area + 0.5331 * log(Double(sums.luma) / pairs + 0.3) + 0.2491 * log(Double(sums.chroma) / pairs + 0.3)
    }
}
