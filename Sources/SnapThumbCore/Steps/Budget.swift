import Foundation
import VipsKit

extension PipelineStep {
    /// square100: the highest JPEG quality in range whose encoding fits the budget
    /// (inline: the push payload's room, see `Settings.squareBudget`).
    static let encodeWithinBudget = PipelineStep(name: "encode within budget") { snap in
        let square = snap.settings.square, rgb = snap.square, limit = snap.settings.squareBudget
        let jpeg = try JPEGBudgetSearch.fit(
            range: square.qualityMin...square.qualityMax,
            budget: limit.map { Budget(limit: $0, mode: snap.settings.budgetMode) },
            encode: { try JPEG.encode(rgb: rgb, width: square.size, height: square.size, quality: $0) })
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

/// Finds the highest JPEG quality whose encoding fits a budget, in few encodes.
///
/// JPEG size against quality has a typical shape: `shape` below is the mean of
/// ln(size(q) / size(90)) over 80 real 100 px snaps (4:2:0, optimised Huffman;
/// its spread is ±0.02–0.1). Each guess fits `ln size = a + b · shape(q)`
/// through the nearest fitting and failing encodes seen so far (one point:
/// b = 1) and solves it for the budget. The path depends only on the image, so
/// the answer is deterministic.
enum JPEGBudgetSearch {
    /// Below the range's floor: fixed steps tried in order before giving up.
    static let ladder = [30, 20, 10, 5, 1]

    /// ln(size(q) / size(90)) at q = 10, 15, …, 90 (measured; see above).
    static let shapeTable: [Double] = [-1.591, -1.397, -1.255, -1.140, -1.048, -0.968, -0.908, -0.844, -0.791,
                                       -0.739, -0.680, -0.612, -0.534, -0.454, -0.340, -0.200, 0.000]

    /// The typical curve at any quality (linear between the table's points, extended at the ends).
    static func shape(_ q: Double) -> Double {
        let position = (q - 10) / 5
        let i = min(max(Int(position.rounded(.down)), 0), shapeTable.count - 2)
        let t = position - Double(i)
        return shapeTable[i] + t * (shapeTable[i + 1] - shapeTable[i])
    }

    /// The quality whose shape value is `value` (the curve is increasing).
    static func inverseShape(_ value: Double) -> Double {
        var low = -40.0, high = 140.0
        for _ in 0..<40 {
            let mid = (low + high) / 2
            if shape(mid) < value { low = mid } else { high = mid }
        }
        return low
    }

    static func fit(range: ClosedRange<Int>, budget: Budget?, encode: (Int) throws -> [UInt8]) throws -> Fitted {
        var encodes = 0
        func run(_ q: Int) throws -> [UInt8] { encodes += 1; return try encode(q) }

        let top = try run(range.upperBound)
        guard let budget else { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }
        if budget.fits(top.count) { return Fitted(bytes: top, quality: range.upperBound, encodes: encodes, degraded: false) }

        var fail = (q: range.upperBound, size: top.count)
        var fit: (q: Int, bytes: [UInt8])?
        // The largest byte count the budget allows, as a log size to aim at.
        let target = log(Double(budget.mode == .inline ? budget.limit / 4 * 3 : budget.limit))

        while true {
            let low = fit?.q ?? (range.lowerBound - 1)
            if fail.q - low <= 1 { break }
            let failLog = log(Double(fail.size))
            var slope = 1.0
            if let fit {
                let spread = shape(Double(fail.q)) - shape(Double(fit.q))
                if spread > 0 { slope = max(0.2, (failLog - log(Double(fit.bytes.count))) / spread) }
            }
            let offset = failLog - slope * shape(Double(fail.q))
            let predicted = inverseShape((target - offset) / slope)
            let guess = min(max(Int(predicted.rounded(.down)), low + 1), fail.q - 1)
            let bytes = try run(guess)
            if budget.fits(bytes.count) { fit = (guess, bytes) } else { fail = (guess, bytes.count) }
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
