/// Order statistics for benchmark reports.
public enum Statistics {
    /// The `p`-th percentile (0–100) of `values`, interpolating linearly between
    /// the two nearest ranks (NumPy's default), so p50 of an even count is the
    /// mean of the middle two. Nil when there are no values.
    public static func percentile(_ values: [Double], _ p: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = min(max(p, 0), 100) / 100 * Double(sorted.count - 1)
        let low = Int(rank.rounded(.down)), high = Int(rank.rounded(.up))
        return sorted[low] + (sorted[high] - sorted[low]) * (rank - Double(low))
    }

    public static func median(_ values: [Double]) -> Double? { percentile(values, 50) }

    public static func mean(_ values: [Double]) -> Double? {
        values.isEmpty ? nil : values.reduce(0, +) / Double(values.count)
    }
}
