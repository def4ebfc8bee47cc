import Foundation

/// A codec's typical curve of ln size against quality (the same shape for every
/// image, shifted by the image's own detail), and its inverse.
protocol SizeCurve {
    func shape(_ q: Double) -> Double
    func inverseShape(_ value: Double) -> Double
}

/// The budget search both squares share (square100's JPEG and the modern AVIF/HEIC
/// square): try a guess; stop at the first try that fits and fills enough of the
/// budget, or at the top quality, or one step under a miss; otherwise fit the curve
/// through the nearest fit and miss seen so far and solve it for the target size.
/// A try is whatever tells the size at a quality: an encode (the modern square), or
/// the exact size of square100's JPEG from its plan, which is written once at the end.
struct QualitySearch<Curve: SizeCurve> {
    var curve: Curve
    /// Qualities tried: at most `top`; nothing under `bottom`.
    var bottom: Int
    var top: Int
    /// Fill that ends the search on the first encode, and on any later one.
    var firstFill: Double
    var laterFill: Double
    /// How far a fitted slope may differ from the typical curve's.
    var slopes: ClosedRange<Double>
    /// With a fit and a miss known, keep a quarter of the bracket away from both ends
    /// (a guard against crawling along a flat stretch of the curve); else one step.
    var quarterBracket: Bool

    struct Outcome<Trial> {
        var fit: (q: Int, trial: Trial, size: Int)?
        var fail: (q: Int, size: Int)?
        var encodes: Int
    }

    /// - Parameters:
    ///   - allowed: the largest byte count the budget allows; `fits` says whether a size is within it.
    ///   - target: ln of the size to aim at.
    ///   - size: the byte count of a try.
    func run<Trial>(start: Int, allowed: Double, target: Double, fits: (Int) -> Bool, size: (Trial) -> Int,
                    encode: (Int) throws -> Trial) rethrows -> Outcome<Trial> {
        var outcome = Outcome<Trial>(encodes: 0)
        var guess = start
        while true {
            outcome.encodes += 1
            let trial = try encode(guess)
            let bytes = size(trial)
            if fits(bytes) { outcome.fit = (guess, trial, bytes) } else { outcome.fail = (guess, bytes) }
            let (fit, fail) = (outcome.fit, outcome.fail)

            if let fit, fit.q == top || Double(fit.size) >= (outcome.encodes == 1 ? firstFill : laterFill) * allowed { break }
            let low = fit?.q ?? bottom - 1
            let high = fail?.q ?? top + 1
            if high - low <= 1 { break }

            var slope = 1.0
            let reference: (q: Int, size: Int)
            if let fit, let fail {
                let spread = curve.shape(Double(fail.q)) - curve.shape(Double(fit.q))
                if spread > 0 {
                    let measured = (log(Double(fail.size)) - log(Double(fit.size))) / spread
                    slope = min(max(measured, slopes.lowerBound), slopes.upperBound)
                }
                reference = fail
            } else if let fail {
                reference = fail
            } else {
                reference = (fit!.q, fit!.size)
            }
            let offset = log(Double(reference.size)) - slope * curve.shape(Double(reference.q))
            let predicted = Int(curve.inverseShape((target - offset) / slope).rounded(.down))
            let margin = quarterBracket && fit != nil && fail != nil ? max(1, (high - low) / 4) : 1
            guess = min(max(predicted, low + margin), high - margin)
        }
        return outcome
    }
}
