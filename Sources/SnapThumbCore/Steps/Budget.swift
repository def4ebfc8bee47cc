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
/// Size grows roughly exponentially with quality, so each guess interpolates
/// log-size between the nearest fitting and failing qualities seen so far; the
/// interval then shrinks to one step. The path depends only on the image, so
/// the answer is deterministic.
enum JPEGBudgetSearch {
    /// Below the range's floor: fixed steps tried in order before giving up.
    static let ladder = [30, 20, 10, 5, 1]

    /// Rough slope of ln(size) per quality step for small JPEGs, for the first guess.
    static let slope = 0.03

    static func fit(range: ClosedRange<Int>, budget: Budget?, encode: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> [UInt8] { encodes += 1; return try encode(q) }

        let top = try run(range.upperBound)
        guard let budget else { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }
        if budget.fits(top.count) { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }

        var fail = (q: range.upperBound, size: top.count)
        var fit: (q: Int, bytes: [UInt8])?
        let target = log(Double(budget.limit) * (budget.mode == .inline ? 0.75 : 1.0))

        while true {
            let low = fit?.q ?? (range.lowerBound - 1)
            if fail.q - low <= 1 { break }
            var guess: Int
            if let fit {
                let a = log(Double(fit.bytes.count)), b = log(Double(fail.size))
                let t = b > a ? (target - a) / (b - a) : 0.5
                guess = fit.q + Int((t * Double(fail.q - fit.q)).rounded(.down))
            } else {
                guess = fail.q - Int(((log(Double(fail.size)) - target) / slope).rounded(.up))
            }
            guess = min(max(guess, low + 1), fail.q - 1)
            let bytes = try run(guess)
            if budget.fits(bytes.count) {
                fit = (guess, bytes)
                if guess + 1 < fail.q, fail.q - guess > 2 {
                    // Most guesses land just under the boundary: try one above next.
                    let next = try run(guess + 1)
                    if budget.fits(next.count) { fit = (guess + 1, next) } else { fail = (guess + 1, next.count) }
                }
            } else {
                fail = (guess, bytes.count)
            }
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
