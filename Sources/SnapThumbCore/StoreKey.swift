import SystemKit

/// Upload keys: relative paths that stay inside the store.
public enum StoreKey {
    /// Throws `unsafe-name` for a key that is empty, absolute, has an empty,
    /// `.` or `..` segment, a control character, or a segment too long for a file name.
    public static func validate(_ key: String) throws {
        func refuse(_ why: String) -> SnapError {
            SnapError(.unsafeName, "key \"\(key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined())\" \(why)")
        }
        guard !key.isEmpty else { throw refuse("is empty") }
        guard !PathBytes.isAbsolute(key) else { throw refuse("is an absolute path") }
        guard !key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw refuse("contains a control character")
        }
        guard !key.contains("\\") else { throw refuse("contains a backslash") }
        // By bytes: "../\u{301}x" is three segments, though a Character split sees one.
        for segment in PathBytes.segments(key) {
            if segment.isEmpty { throw refuse("has an empty path segment") }
            if segment == "." || segment == ".." { throw refuse("has a '\(segment)' segment, which could escape the store") }
            if segment.utf8.count + ".json".utf8.count > 255 { throw refuse("has a segment longer than a file name may be") }
        }
    }
}
