import Foundation
import VipsKit
import SystemKit

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

/// Finds a JPEG quality whose file fills most of a budget without going over it,
/// in few tries (under two on average). A try is the file's size at one quality,
/// counted from one transform of the square (`JPEG.Plan`); the file is written once.
///
/// JPEG size against quality has a typical shape: `Model.shape` is the mean of
/// ln(size(q) / size(90)) over 120 real 100 px snaps (`Scripts/make-corpus.sh`,
/// measured beyond 90 one quality at a time because the curve steepens there:
/// quality 99 → 100 adds about a quarter). The first guess comes from the pixels:
/// ln size at each quality of the table is predicted from five features of
/// neighbouring pixels (`PixelSteps`, `Model.sizeTable`, fitted on those snaps and
/// the sample photos together), so the first try usually lands near the target.
/// Each later guess moves that predicted curve through the nearest fitting and
/// failing tries seen so far (`ln size = a + b · curve(q)`; one point: b = 1) and
/// solves it for the target. The search stops as soon as a try fits and fills at
/// least `fill` of the budget (`laterFill` once the first guess has missed), or is
/// the range's top, or its neighbour one quality up does not fit. The path depends
/// only on the pixels, so the answer is deterministic.
enum JPEGBudgetSearch {
    /// A try that fits and reaches this share of the budget ends the search (with the
    /// pixel-based first guess: a mean fill of 96–97 % in 1.8–1.9 tries on average on
    /// the corpus; docs/performance.md: Budget search).
    static let fill = 0.95
    /// After the first try missed, a try that fits and reaches this share ends the
    /// search: another try would cost more than the last few per cent fill.
    static let laterFill = 0.90
    /// Guesses aim this far under the budget: a miss by the model's typical
    /// error then still fits, and still fills.
    static let aim = 0.985
    /// The first guess aims lower: it comes from the pixels alone, and a first
    /// try over the budget always costs a second.
    static let firstAim = 0.98

    /// The size model for one chroma layout.
    struct Model: Sendable, SizeCurve {
        /// Qualities at which `shapeTable` is measured.
        static let points: [Double] = [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85,
                                       90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100]
        /// ln(size(q) / size(90)) at `points` (measured; see above): the mean curve
        /// (the tests' synthetic sizes follow it).
        let shapeTable: [Double]
        /// ln size(q) of a 100×100 square at each of `points`, predicted from the pixels
        /// before any try: c0 + the features of `PixelSteps`, each times its coefficient.
        /// One fit per quality (least squares over the 120 corpus snaps and the sample
        /// photos, each set weighted equally), because how steeply size falls below 90
        /// differs from image to image. Spread of the fit in ln size at quality 50: 0.08
        /// on the corpus, 0.06 on the samples (docs/performance.md: Budget search).
        let sizeTable: [(c0: Double, luma: Double, chroma: Double, curvature: Double, flat: Double, rms: Double)]

        static let c444 = Model(
            shapeTable: [-2.396, -2.040, -1.774, -1.590, -1.438, -1.318, -1.212, -1.126, -1.051, -0.980, -0.903, -0.839, -0.751,
                         -0.664, -0.550, -0.397, -0.241, 0.000, 0.040, 0.099, 0.192, 0.279, 0.336, 0.526, 0.630, 0.785, 0.962,
                         1.107],
            sizeTable: [
                (4.7382, 0.5321, 0.1065, -0.4472, 0.3236, 0.3382),
                (4.6364, 0.5493, 0.2193, -0.5343, 0.1734, 0.5189),
                (4.8186, 0.4638, 0.3039, -0.4770, 0.0938, 0.5202),
                (4.9832, 0.3831, 0.3463, -0.4178, 0.0277, 0.5198),
                (5.1937, 0.2859, 0.3715, -0.3418, -0.0605, 0.5030),
                (5.3423, 0.2266, 0.3871, -0.2808, -0.1109, 0.4841),
                (5.4871, 0.1478, 0.4016, -0.2160, -0.1625, 0.4732),
                (5.6172, 0.0742, 0.4160, -0.1735, -0.2223, 0.4755),
                (5.7176, 0.0198, 0.4281, -0.1381, -0.2621, 0.4753),
                (5.8383, -0.0117, 0.4333, -0.1067, -0.2903, 0.4550),
                (5.9747, -0.0718, 0.4419, -0.0738, -0.3499, 0.4520),
                (6.0712, -0.1176, 0.4497, -0.0356, -0.3904, 0.4440),
                (6.2138, -0.1606, 0.4584, -0.0026, -0.4357, 0.4280),
                (6.3468, -0.2102, 0.4700, 0.0406, -0.4804, 0.4109),
                (6.5394, -0.2680, 0.4752, 0.0769, -0.5389, 0.3989),
                (6.8197, -0.3645, 0.4797, 0.1358, -0.6324, 0.3841),
                (7.0885, -0.4427, 0.4829, 0.1981, -0.7236, 0.3597),
                (7.4995, -0.4909, 0.4748, 0.2518, -0.7866, 0.3000),
                (7.5587, -0.5009, 0.4762, 0.2645, -0.7923, 0.2895),
                (7.6509, -0.5082, 0.4752, 0.2767, -0.8305, 0.2788),
                (7.8222, -0.5116, 0.4667, 0.2777, -0.8308, 0.2547),
                (7.9724, -0.5324, 0.4611, 0.2861, -0.8615, 0.2463),
                (8.0577, -0.5450, 0.4619, 0.2989, -0.9064, 0.2406),
                (8.4138, -0.5687, 0.4438, 0.2836, -0.9186, 0.2158),
                (8.5808, -0.5809, 0.4392, 0.2884, -0.9534, 0.2040),
                (8.8352, -0.6025, 0.4294, 0.2803, -0.9913, 0.1973),
                (9.1239, -0.6093, 0.4178, 0.2598, -1.0340, 0.1864),
                (9.3564, -0.6144, 0.4040, 0.2316, -1.1261, 0.1997)])
        static let c420 = Model(
            shapeTable: [-2.223, -1.874, -1.623, -1.449, -1.309, -1.198, -1.101, -1.021, -0.952, -0.886, -0.818, -0.757, -0.677,
                         -0.595, -0.493, -0.355, -0.214, 0.000, 0.037, 0.090, 0.170, 0.247, 0.298, 0.461, 0.554, 0.691, 0.846,
                         0.978],
            sizeTable: [
                (4.5669, 0.5237, 0.0401, -0.5175, 0.1932, 0.4555),
                (4.5827, 0.5151, 0.1104, -0.5975, -0.0263, 0.6422),
                (4.8323, 0.4121, 0.1603, -0.5243, -0.1374, 0.6421),
                (4.9966, 0.4015, 0.1871, -0.4502, -0.1268, 0.5746),
                (5.1885, 0.3009, 0.2047, -0.3594, -0.1973, 0.5558),
                (5.3279, 0.2424, 0.2130, -0.2861, -0.2352, 0.5311),
                (5.4493, 0.2037, 0.2229, -0.2300, -0.2466, 0.5010),
                (5.5738, 0.1405, 0.2314, -0.1854, -0.2970, 0.4967),
                (5.6758, 0.1010, 0.2367, -0.1487, -0.3296, 0.4858),
                (5.7762, 0.0969, 0.2394, -0.1208, -0.3325, 0.4517),
                (5.8885, 0.0611, 0.2454, -0.0901, -0.3655, 0.4370),
                (5.9726, 0.0429, 0.2482, -0.0562, -0.3788, 0.4150),
                (6.0897, 0.0291, 0.2533, -0.0264, -0.3870, 0.3843),
                (6.2105, -0.0150, 0.2599, 0.0164, -0.4212, 0.3685),
                (6.3726, -0.0582, 0.2632, 0.0540, -0.4526, 0.3497),
                (6.5845, -0.1088, 0.2671, 0.1036, -0.4862, 0.3207),
                (6.7999, -0.1731, 0.2737, 0.1616, -0.5399, 0.2968),
                (7.1360, -0.2440, 0.2774, 0.2295, -0.6043, 0.2541),
                (7.1882, -0.2600, 0.2803, 0.2450, -0.6080, 0.2462),
                (7.2660, -0.2813, 0.2816, 0.2621, -0.6446, 0.2435),
                (7.4072, -0.2980, 0.2790, 0.2699, -0.6633, 0.2295),
                (7.5338, -0.3279, 0.2776, 0.2852, -0.7003, 0.2261),
                (7.5961, -0.3359, 0.2801, 0.3037, -0.7200, 0.2146),
                (7.8808, -0.3511, 0.2702, 0.2954, -0.7286, 0.1901),
                (8.0251, -0.3761, 0.2692, 0.3086, -0.7699, 0.1846),
                (8.2429, -0.4083, 0.2659, 0.3125, -0.8095, 0.1806),
                (8.4953, -0.4323, 0.2601, 0.3088, -0.8649, 0.1737),
                (8.7037, -0.4529, 0.2489, 0.2905, -0.9438, 0.1915)])

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
            return sizeTable.map {
                $0.c0 + area + $0.luma * f.luma + $0.chroma * f.chroma + $0.curvature * f.curvature + $0.flat * f.flat + $0.rms * f.rms
            }
        }
    }

    /// What the size prediction reads from the pixels: ln(mean + 0.3) of the absolute
    /// luma and chroma (B − Y, R − Y) differences between neighbours, and of the luma
    /// second differences (2·y − left − right, and up/down), over rows and columns
    /// (+ 0.3: grey images have no chroma steps at all); the share of neighbours whose
    /// luma differs by at most 1 (flat areas: smooth gradients and graphics code smaller
    /// than their mean steps say); ln(root mean square luma difference + 0.3) (a few
    /// hard edges cost more than many soft ones of the same mean).
    struct PixelSteps {
        let luma: Double, chroma: Double, curvature: Double, flat: Double, rms: Double

        init(rgb: [UInt8], side: Int) {
            let sums = Resample.neighbourSums(rgb: rgb, side: side)
            let pairs = Double(max(1, 2 * side * (side - 1))), triples = Double(max(1, 2 * side * (side - 2)))
            // Clamped to about the range the tables were fitted on: a grey square
            // (no chroma steps at all) is far outside it, and its size is not.
            luma = min(max(log(Double(sums.luma) / pairs + 0.3), 0.7), 2.5)
            chroma = min(max(log(Double(sums.chroma) / pairs + 0.3), 0.6), 3.2)
            curvature = min(max(log(Double(sums.second) / triples + 0.3), 0.25), 2.7)
            flat = min(max(Double(sums.flat) / pairs, 0.1), 0.9)
            rms = min(max(log((Double(sums.squares) / pairs).squareRoot() + 0.3), 1.0), 3.6)
        }
    }

    /// The 4:2:0 model (the tests' synthetic size curves use it).
    static func shape(_ q: Double) -> Double { Model.c420.shape(q) }

    /// The first quality to try under `budget`, from the pixels alone (their predicted curve).
    static func firstGuess(curve: PredictedCurve, budget: Budget) -> Int {
        let predicted = curve.table
        let target = log(Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit) * firstAim)
        return Int(Model.inverse(target) { Model.interpolate(predicted, at: $0) }.rounded(.down))
    }

    /// Qualities below `range` are searched the same way when nothing in it fits;
    /// the result is then marked degraded.
    /// - Parameters:
    ///   - start: the first quality to try (clamped to 1…the range's top); the
    ///     range's top when nil.
    ///   - size: the byte count of the JPEG at a quality, without writing it (a try,
    ///     counted in `encodes`); it may be a few bytes off the written size.
    ///   - write: the JPEG at a quality. The search writes the quality it chose; if
    ///     that comes out over the budget after all, the next quality down (each
    ///     write counted in `encodes` as well).
    static func fit(range: ClosedRange<Int>, budget: Budget?, model: some SizeCurve = Model.c420, start: Int? = nil,
                    size: (Int) throws -> Int, write: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> Int { encodes += 1; return try size(q) }

        guard let budget else {
            return Fitted(bytes: try write(range.upperBound), quality: range.upperBound, encodes: 1, degraded: false)
        }
        // The largest byte count the budget allows.
        let allowed = Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit)
        let target = log(allowed * aim)

        let search = QualitySearch(curve: model, bottom: 1, top: range.upperBound, firstFill: fill, laterFill: laterFill,
                                   slopes: 0.2...Double.infinity, quarterBracket: false)
        let outcome = try search.run(start: min(max(start ?? range.upperBound, 1), range.upperBound), allowed: allowed, target: target,
                                     fits: budget.fits, size: { $0 }, encode: run)
        var q = outcome.fit?.q ?? 1
        var bytes = try write(q)
        while !budget.fits(bytes.count) && q > 1 {
            encodes += 1
            q -= 1
            bytes = try write(q)
        }
        guard budget.fits(bytes.count) else {
            throw SnapError(.budget, "even at JPEG quality 1 the thumbnail is \(bytes.count) bytes, over its budget of \(budget.limit) (\(budget.mode.rawValue) mode)")
        }
        return Fitted(bytes: bytes, quality: q, encodes: encodes, degraded: q < range.lowerBound)
    }

    /// The curve of ln size against quality that the model predicts for one image
    /// (`Model.predictedLogSizes`), which later guesses move through the sizes tried.
    struct PredictedCurve: SizeCurve {
        let table: [Double]
        func shape(_ q: Double) -> Double { Model.interpolate(table, at: q) }
        func inverseShape(_ value: Double) -> Double { Model.inverse(value, of: shape) }
    }

    /// square100's search: the first guess and the curve from the pixels (the model of
    /// the chroma layout), every try a size from one plan (one colour conversion and DCT).
    static func fitSquare(rgb: [UInt8], side: Int, settings: Settings.SquareSettings, budget: Budget?) throws -> Fitted {
        let plan = try JPEG.Plan(rgb: rgb, width: side, height: side, chroma: settings.chroma)
        let range = settings.qualityMin...settings.qualityMax
        let size = { (q: Int) in plan.estimatedSize(quality: q) }, write = { (q: Int) in try plan.write(quality: q) }
        guard let budget else { return try fit(range: range, budget: nil, size: size, write: write) }
        let curve = PredictedCurve(table: Model.of(settings.chroma).predictedLogSizes(rgb: rgb, side: side))
        return try fit(range: range, budget: budget, model: curve, start: firstGuess(curve: curve, budget: budget), size: size, write: write)
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
