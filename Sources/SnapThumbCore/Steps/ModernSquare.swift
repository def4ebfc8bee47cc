import Foundation
import VipsKit

extension PipelineStep {
    /// square100-avif / square100-heic, only when `square.modern` asks for it: the very
    /// pixels of square100 (so both are scored against the same reference), in AVIF or
    /// HEIC 4:4:4 through libvips' heifsave, under square100's budget.
    static let encodeModernWithinBudget = PipelineStep(name: "encode modern square") { snap in
        guard let codec = snap.settings.square.modern else { return }
        let square = snap.settings.square, rgb = snap.square, limit = snap.settings.squareBudget
        let budget = limit.map { Budget(limit: $0, mode: snap.settings.budgetMode) }
        let fitted = try ModernBudgetSearch.fit(
            budget: budget, codec: codec, start: budget.map { ModernBudgetSearch.firstGuess(rgb: rgb, side: square.size, budget: $0) },
            encode: { try HEIF.encode(rgb: rgb, width: square.size, height: square.size, codec: codec, quality: $0, effort: square.modernEffort) })
        snap.encoded.append(EncodedVariant(name: ModernBudgetSearch.variantName(codec), fitted: fitted, mediaType: codec.mediaType,
                                           side: square.size, budget: limit))
    }
}

/// Finds the highest heifsave quality (1–100) whose AVIF or HEIC fits the budget, in
/// few encodes: each costs milliseconds (docs/performance.md: Modern variant).
///
/// A 100 px HEIF is a container of about 280 bytes around the coded image, whose size
/// grows about exponentially with the quality: ln(bytes − `container`) is close to a
/// line in the quality. The first guess comes from the pixels (the JPEG model's measure
/// of detail, `JPEGBudgetSearch.Model.predictedLogSize90`) and the budget; each later
/// guess draws the line through the nearest fitting and failing encodes (one point: the
/// typical slope) and solves it for the budget. The search stops at the first encode that
/// fits and fills `fill` of the budget, at quality 100, or one step under a miss. The path
/// depends only on the pixels: the answer is deterministic.
///
/// Below `floor` the result is marked degraded; when even quality 1 does not fit, the
/// upload fails as `budget`, like square100 (which, being larger at equal quality, fails first).
enum ModernBudgetSearch {
    /// The manifest's name of the modern square.
    static func variantName(_ codec: HEIF.Codec) -> String { "square100-\(codec.rawValue)" }

    static let range = 1...100
    /// Below this quality the picture visibly loses detail (docs/performance.md): degraded.
    static let floor = 20
    /// An encode that fits and reaches this share of the budget ends the search.
    static let fill = 0.92
    /// Guesses aim this far under the budget.
    static let aim = 0.97
    /// Bytes of the HEIF container (ftyp, meta, iloc, properties) around the coded image.
    static let container = 280.0
    /// Typical d ln(coded bytes) / d quality (measured on the corpus).
    static let slope = 0.035
    /// First guess: quality ≈ c0 + c1 · (ln allowed − predicted ln JPEG size at q90).
    static let prior = (c0: 62.0, c1: 30.0)

    /// The first quality to try for `rgb` under `budget`.
    static func firstGuess(rgb: [UInt8], side: Int, budget: Budget) -> Int {
        let detail = JPEGBudgetSearch.Model.c444.predictedLogSize90(rgb: rgb, side: side)
        let guess = prior.c0 + prior.c1 * (log(allowed(budget)) - detail)
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
        let allowed = allowed(budget)
        func coded(_ size: Double) -> Double { log(max(size - container, 16)) }
        let target = coded(allowed * aim)

        var fit: (q: Int, bytes: [UInt8])?
        var fail: (q: Int, size: Int)?
        var guess = min(max(start ?? 50, range.lowerBound), range.upperBound)
        while true {
            let bytes = try run(guess)
            if budget.fits(bytes.count) { fit = (guess, bytes) } else { fail = (guess, bytes.count) }

            if let fit, fit.q == range.upperBound || Double(fit.bytes.count) >= fill * allowed { break }
            let low = fit?.q ?? range.lowerBound - 1
            let high = fail?.q ?? range.upperBound + 1
            if high - low <= 1 { break }

            var rate = slope
            let reference: (q: Int, size: Int)
            if let fit, let fail {
                rate = max(0.005, (coded(Double(fail.size)) - coded(Double(fit.bytes.count))) / Double(fail.q - fit.q))
                reference = (fit.q, fit.bytes.count)
            } else if let fail {
                reference = fail
            } else {
                reference = (fit!.q, fit!.bytes.count)
            }
            let predicted = Double(reference.q) + (target - coded(Double(reference.size))) / rate
            guess = min(max(Int(predicted.rounded(.down)), low + 1), high - 1)
        }
        if let fit { return Fitted(bytes: fit.bytes, quality: fit.q, encodes: encodes, degraded: fit.q < floor) }
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

    final class Checked: @unchecked Sendable {
        private let lock = NSLock()
        private var codecs = Set<HEIF.Codec>()
        func contains(_ codec: HEIF.Codec) -> Bool { lock.withLock { codecs.contains(codec) } }
        func insert(_ codec: HEIF.Codec) { _ = lock.withLock { codecs.insert(codec) } }
    }
}
