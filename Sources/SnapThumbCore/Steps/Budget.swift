import Foundation

/// A byte budget: how large an encoded variant may be.
public struct Budget: Sendable, Equatable {
    public var limit: Int
    public var mode: Settings.BudgetMode

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

/// Finds the highest JPEG quality whose encoding fits a budget, in few encodes.
///
/// Guesses come from a model of how libjpeg's size follows quality:
/// ln(size) ≈ c − ½·ln(scale(q)) (+ a jump where chroma stops being subsampled),
/// where scale(q) is libjpeg's quantiser scaling (5000/q below 50, 200 − 2q
/// above). One encode fixes `c`; with a fitting and a failing quality known the
/// guess interpolates log-size between them on the model's axis (Illinois rule
/// against a bound that sticks). On 254 real photos at a 4096 B budget this takes
/// 2.03 encodes on average (max 5) where a log-linear guess took 4.43 (max 11),
/// at 2048 B 3.74 against 7.36, and finds the same qualities as trying them all. The path depends
/// only on the image, so the answer is deterministic.
enum JPEGBudgetSearch {
    /// Below the range's floor: fixed steps tried in order before giving up.
    static let ladder = [30, 20, 10, 5, 1]

    /// The model's ln(size) at `q`, up to a per-image constant.
    static func modelLogSize(_ q: Int) -> Double {
        let q = min(max(q, 1), 100)
        let scale = q < 50 ? 5000 / Double(q) : max(1, 200 - 2 * Double(q))
        // 4:4:4 chroma from quality 90 (JPEG.encode) adds about 0.256 to ln(size).
        return -0.5 * log(scale) + (q >= 90 ? 0.256 : 0)
    }

    static func fit(range: ClosedRange<Int>, budget: Budget?, encode: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> [UInt8] { encodes += 1; return try encode(q) }

        let top = try run(range.upperBound)
        guard let budget else { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }
        if budget.fits(top.count) { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }

        // Log-sizes are kept separately from the bytes so that a bound the search keeps
        // landing on the same side of can be pulled towards the target (Illinois rule).
        var fail = (q: range.upperBound, size: top.count, logSize: log(Double(top.count)))
        var fit: (q: Int, bytes: [UInt8], logSize: Double)?
        var lastFitted: Bool?
        let target = log(Double(budget.limit) * (budget.mode == .inline ? 0.75 : 1.0))

        while true {
            let low = fit?.q ?? (range.lowerBound - 1)
            if fail.q - low <= 1 { break }
            // The highest quality strictly between low and fail.q whose predicted size fits.
            let predicted: (Int) -> Double
            if let fit {
                let a = fit.logSize, b = fail.logSize
                let ma = modelLogSize(fit.q), mb = modelLogSize(fail.q)
                predicted = { q in mb > ma ? a + (modelLogSize(q) - ma) / (mb - ma) * (b - a) : a }
            } else {
                let c = fail.logSize - modelLogSize(fail.q)
                predicted = { q in c + modelLogSize(q) }
            }
            let guess = ((low + 1)..<fail.q).last { predicted($0) <= target } ?? (low + 1)
            let bytes = try run(guess)
            let fits = budget.fits(bytes.count)
            if fits {
                if lastFitted == true { fail.logSize = target + (fail.logSize - target) / 2 }
                fit = (guess, bytes, log(Double(bytes.count)))
            } else {
                if lastFitted == false, fit != nil { fit!.logSize = target - (target - fit!.logSize) / 2 }
                fail = (guess, bytes.count, log(Double(bytes.count)))
            }
            lastFitted = fits
        }
        if let fit { return Fitted(bytes: fit.bytes, quality: fit.q, encodes: encodes, degraded: false) }

        var smallest = (q: fail.q, size: fail.size)
        for q in ladder where q < range.lowerBound {
            let bytes = try run(q)
            if budget.fits(bytes.count) { return Fitted(bytes: bytes, quality: q, encodes: encodes, degraded: true) }
            smallest = (q, bytes.count)
        }
        throw SnapError(.budget, "even at JPEG quality \(smallest.q) the thumbnail is \(smallest.size) bytes, over its budget of \(budget.limit) (\(budget.mode.rawValue) mode)")
    }
}
