import Foundation
import SnapThumbStore

/// The input formats `bench` reports on their own when a directory holds both: JPEG
/// and HEIC cost very different amounts (a phone's HEIC is a 12 MP HEVC image with a
/// small thumbnail inside), so one figure over a mix says little about either.
public enum FormatGroup: String, Sendable, CaseIterable {
    case jpeg
    /// HEIF files with HEVC images (what phones write); AVIF is not counted here.
    case heic

    /// The name in the table.
    public var title: String { rawValue.uppercased() }

    /// The group of the file at `path` from its first bytes, or nil (any other format).
    static func of(_ path: String) -> FormatGroup? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        guard let head = try? handle.read(upToCount: 64) else { return nil }
        return of(head: [UInt8](head))
    }

    /// JPEG: FF D8 FF. HEIC: an ISO BMFF `ftyp` box whose major or compatible brands
    /// name HEVC images (heic, heix, hevc, hevx, heim, heis).
    static func of(head: [UInt8]) -> FormatGroup? {
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return .jpeg }
        guard head.count >= 16, Array(head[4..<8]) == Array("ftyp".utf8) else { return nil }
        let size = Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3])
        let end = min(head.count, max(16, size))
        let hevc: Set<String> = ["heic", "heix", "hevc", "hevx", "heim", "heis"]
        // The major brand at 8, the minor version at 12, compatible brands from 16.
        for start in stride(from: 8, to: end - 3, by: 4) where start != 12 {
            if hevc.contains(String(decoding: head[start..<start + 4], as: UTF8.self)) { return .heic }
        }
        return nil
    }

    /// `files` split by group, in the order of `allCases`, when at least two groups have
    /// files (one group is the whole set: the main table already says it); else empty.
    static func split(_ files: [FileWalker.Entry]) -> [(group: FormatGroup, indices: [Int])] {
        var indices: [FormatGroup: [Int]] = [:]
        for (i, entry) in files.enumerated() {
            if let group = of(entry.path) { indices[group, default: []].append(i) }
        }
        guard indices.count >= 2 else { return [] }
        return allCases.compactMap { group in indices[group].map { (group, $0) } }
    }

    /// The references that make an image of this group's files: the floor and Pillow
    /// read JPEG only (Pillow has no HEIF reader of its own).
    func applies(_ tool: ReferenceTool) -> Bool {
        self == .jpeg || tool == .vipsthumbnail
    }
}
