/// `--shard I/N`: this machine's share of a backfill that N machines split with
/// no coordination. A key belongs to shard `FNV-1a-64(key) mod N` (0-based), a
/// hash that never changes between runs, machines or releases: every key is in
/// exactly one shard, and a re-run of a shard sees the same keys.
public struct Shard: Sendable, Equatable, CustomStringConvertible {
    public let index: Int
    public let count: Int

    /// Parses `I/N` with 0 <= I < N.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let i = Int(parts[0]), let n = Int(parts[1]), n >= 1, i >= 0, i < n else { return nil }
        index = i
        count = n
    }

    public var description: String { "\(index)/\(count)" }

    public func contains(_ key: String) -> Bool { Int(Self.hash(key) % UInt64(count)) == index }

    /// FNV-1a, 64 bits, over the key's UTF-8 bytes.
    public static func hash(_ key: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            h ^= UInt64(byte)
            h = h &* 0x0000_0100_0000_01B3
        }
        return h
    }
}
