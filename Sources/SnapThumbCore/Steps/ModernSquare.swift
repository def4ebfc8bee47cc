import Foundation
import VipsKit
import SystemKit
import Synchronization

extension PipelineStep {
    /// square100-avif / square100-heic, only when `square.modern` asks for it: the very
    /// pixels of square100 (so both are scored against the same reference), in AVIF or
    /// HEIC 4:4:4 through libvips' heifsave, under square100's budget; the AVIF's colour
    /// box declares sRGB (`HEIFColourBox`).
    static let encodeModernWithinBudget = PipelineStep(name: "encode modern square") { snap in
        guard let codec = snap.settings.square.modern else { return }
        let square = snap.settings.square, rgb = snap.square, limit = snap.settings.squareBudget
        let budget = limit.map { Budget(limit: $0, mode: snap.settings.budgetMode) }
        let fitted = try ModernBudgetSearch.fit(
            budget: budget, codec: codec, start: budget.map { ModernBudgetSearch.firstGuess(rgb: rgb, side: square.size, budget: $0, codec: codec) },
            encode: {
                let heif = try HEIF.encode(rgb: rgb, width: square.size, height: square.size, codec: codec, quality: $0, effort: square.modernEffort)
                // libheif writes no colour box into HEIC on purpose (Apple's decoders), only into AVIF.
                guard codec == .avif else { return heif }
                do { return try HEIFColourBox.declaringSRGB(heif) } catch {
                    // A libheif that writes none must not publish an undeclared image silently.
                    throw SnapError(.internal, "\(error)")
                }
            })
        snap.encoded.append(EncodedVariant(name: ModernBudgetSearch.variantName(codec), fitted: fitted, mediaType: codec.mediaType,
                                           side: square.size, budget: limit))
    }
}

/// Finds the highest heifsave quality (1–100) whose AVIF or HEIC fits the budget, in
/// few encodes: each costs milliseconds (docs/performance.md: Modern variant).
///
/// Modelled like square100's JPEG search: the size of a 100 px HEIF against quality has a
/// typical shape per codec (`Model.shapeTable`: the mean ln(size(q) / size(50)) over the
/// 120 corpus snaps at effort 2; it steepens towards 100, where libheif's qualities map onto
/// libaom's finest quantisers, and x265's flattens above 95). The first guess comes from
/// the pixels: ln size(50) is predicted from the JPEG model's measure of detail
/// (`JPEGBudgetSearch.Model.predictedLogSize90` of the same pixels). Each later guess fits
/// `ln size = a + b · shape(q)` through the nearest fitting and failing encodes (one point:
/// b = 1), solves it for the budget, and stays a quarter of the bracket away from its ends,
/// so that a flat stretch of the curve cannot make it crawl. The search stops at the first
/// encode that fits and fills `fill` of the budget, at quality 100, or one step under a
/// miss. The path depends only on the pixels: the answer is deterministic.
///
/// Below `floor` the result is marked degraded; when even quality 1 does not fit, the
/// upload fails as `budget`, like square100 (which, larger at every quality, fails first).
enum ModernBudgetSearch {
    /// The manifest's name of the modern square.
    static func variantName(_ codec: HEIF.Codec) -> String { "square100-\(codec.rawValue)" }

    static let range = 1...100
    /// Below this quality the picture visibly smears fine detail (docs/performance.md): degraded.
    static let floor = 20
    /// An encode that fits and reaches this share of the budget ends the search.
    static let fill = 0.92
    /// Guesses aim this far under the budget.
    static let aim = 0.97

    /// How a codec's size grows with quality (fitted on the 120 corpus snaps, effort 2).
    struct Model: Sendable, SizeCurve {
        /// Qualities at which `shapeTable` is measured.
        static let points: [Double] = [1, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85,
                                       90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100]
        /// Mean ln(size(q) / size(50)) at `points`.
        let shapeTable: [Double]
        /// ln size(50) ≈ c0 + detail · (predicted ln JPEG size at quality 90 of the same pixels).
        let prior: (c0: Double, detail: Double)

        /// Per-image residual of the shape 0.09 in ln size; prior residual 0.12 (rms).
        static let avif = Model(
            shapeTable: [-1.065, -0.980, -0.880, -0.791, -0.676, -0.581, -0.476, -0.368, -0.246, -0.122, 0.000, 0.174,
                         0.305, 0.416, 0.508, 0.612, 0.743, 0.956, 1.192, 1.192, 1.288, 1.415, 1.415, 1.555, 1.555,
                         1.746, 1.965, 1.965, 2.341],
            prior: (-2.5337, 1.1377))
        /// Per-image residual of the shape 0.08; prior residual 0.15.
        static let heic = Model(
            shapeTable: [-1.293, -1.256, -1.209, -1.100, -1.005, -0.840, -0.717, -0.516, -0.371, -0.153, 0.000, 0.226,
                         0.378, 0.605, 0.760, 1.000, 1.170, 1.437, 1.605, 1.681, 1.681, 1.748, 1.748, 1.752, 1.752,
                         1.752, 1.752, 1.752, 1.752],
            prior: (-0.5485, 0.9378))

        static func of(_ codec: HEIF.Codec) -> Model { codec == .avif ? .avif : .heic }

        /// The typical curve at any quality (linear between the table's points, extended at the ends).
        func shape(_ q: Double) -> Double {
            let points = Model.points
            var i = 0
            while i < points.count - 2 && q > points[i + 1] { i += 1 }
            let t = (q - points[i]) / (points[i + 1] - points[i])
            return shapeTable[i] + t * (shapeTable[i + 1] - shapeTable[i])
        }

        /// The lowest quality whose shape value reaches `value` (the curve never falls).
        func inverseShape(_ value: Double) -> Double {
            var low = -40.0, high = 140.0
            for _ in 0..<40 {
                let mid = (low + high) / 2
                if shape(mid) < value { low = mid } else { high = mid }
            }
            return low
        }
    }

    /// The first quality to try for `rgb` under `budget`.
    static func firstGuess(rgb: [UInt8], side: Int, budget: Budget, codec: HEIF.Codec) -> Int {
        let model = Model.of(codec)
        let detail = JPEGBudgetSearch.Model.c444.predictedLogSize90(rgb: rgb, side: side)
        let size50 = model.prior.c0 + model.prior.detail * detail
        let guess = model.inverseShape(log(aim * allowed(budget)) - size50)
        return min(max(Int(guess.rounded(.down)), range.lowerBound), range.upperBound)
    }

    /// The largest byte count `budget` allows.
    static func allowed(_ budget: Budget) -> Double {
        Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit)
    }

    static func fit(budget: Budget?, codec: HEIF.Codec, start: Int?, encode: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> [UInt8] { encodes += 1; return try encode(q) }
        guard let budget else {
            return Fitted(bytes: try run(range.upperBound), quality: range.upperBound, encodes: encodes, degraded: false)
        }
        let model = Model.of(codec)
        let allowed = allowed(budget)
        let target = log(allowed * aim)

        let search = QualitySearch(curve: model, bottom: range.lowerBound, top: range.upperBound, firstFill: fill, laterFill: fill,
                                   slopes: 0.5...2, quarterBracket: true)
        let outcome = try search.run(start: min(max(start ?? 50, range.lowerBound), range.upperBound), allowed: allowed, target: target,
                                     fits: budget.fits, size: \.count, encode: run)
        let (fit, fail) = (outcome.fit, outcome.fail)
        if let fit { return Fitted(bytes: fit.trial, quality: fit.q, encodes: encodes, degraded: fit.q < floor) }
        throw SnapError(.budget, "even at \(codec == .avif ? "AVIF" : "HEIC") quality \(range.lowerBound) \(variantName(codec)) is \(fail!.size) bytes, over its budget of \(budget.limit) (\(budget.mode.rawValue) mode)")
    }
}

/// A libvips without heifsave (or a libheif without the encoder) must be found when the
/// pipeline is built, before any upload, not as an `internal` failure of every upload:
/// building a pipeline that makes a modern square encodes one 8×8 image first (once per
/// process and codec) and turns a failure into a configuration error.
enum ModernEncoderCheck {
    static func require(_ codec: HEIF.Codec) throws {
        if checked.contains(codec) { return }
        try require(codec, probe: probeEncode)
        checked.insert(codec)
    }

    /// The check with a given probe (tests pass one that fails like a libvips without heifsave).
    static func require(_ codec: HEIF.Codec, probe: (HEIF.Codec) throws -> Void) throws {
        do {
            try probe(codec)
        } catch {
            let encoder = codec == .avif ? "an AV1 encoder (libheif with libaom)" : "an HEVC encoder (libheif with x265)"
            throw SnapError(.config, "--modern \(codec.rawValue) needs libvips' heifsave with \(encoder), and this libvips cannot encode \(codec == .avif ? "AVIF" : "HEIC") (\(error)); install libheif1 with its encoders (Debian: libheif1, libaom3, libx265) or use --modern none", cause: "\(error)")
        }
    }

    static func probeEncode(_ codec: HEIF.Codec) throws {
        _ = try HEIF.encode(rgb: [UInt8](repeating: 128, count: 8 * 8 * 3), width: 8, height: 8, codec: codec, quality: 50, effort: 0)
    }

    private static let state = Checked()
    private static var checked: Checked { state }

    final class Checked: Sendable {
        private let codecs = Mutex(Set<HEIF.Codec>())
        func contains(_ codec: HEIF.Codec) -> Bool { codecs.withLock { $0.contains(codec) } }
        func insert(_ codec: HEIF.Codec) { _ = codecs.withLock { $0.insert(codec) } }
    }
}
