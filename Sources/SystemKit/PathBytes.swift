import Foundation

/// Paths and keys are sequences of bytes separated by '/': never split them by
/// `Character`, because a '/' followed by a combining mark is one Character
/// ("/\u{301}"), and a Character split misses that slash.
public enum PathBytes {
    /// The '/'-separated segments of `path`, empty ones kept.
    public static func segments(_ path: String) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    /// At most `maxBytes` UTF-8 bytes of `text`, cut on a Unicode scalar boundary.
    public static func prefix(_ text: String, maxBytes: Int) -> String {
        var out = String.UnicodeScalarView()
        var count = 0
        for scalar in text.unicodeScalars {
            count += UTF8.width(scalar)
            if count > maxBytes { break }
            out.append(scalar)
        }
        return String(out)
    }

    /// The extension of a file name ("a.jpg" → "jpg", "a" → "", ".a" → ""), by bytes.
    public static func pathExtension(_ name: String) -> String {
        let bytes = Array(name.utf8)
        guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")), dot > 0, dot < bytes.count - 1 else { return "" }
        return String(decoding: bytes[(dot + 1)...], as: UTF8.self)
    }

    /// Whether a file name is hidden (starts with a '.' byte: ".\u{301}x" is one
    /// Character, so `hasPrefix(".")` would say no).
    public static func isHidden(_ name: String) -> Bool { name.utf8.first == UInt8(ascii: ".") }

    /// Whether `text` starts with the byte '/'.
    public static func isAbsolute(_ text: String) -> Bool { text.utf8.first == UInt8(ascii: "/") }

    /// Whether `text` ends with the byte '/'.
    public static func endsWithSlash(_ text: String) -> Bool { text.utf8.last == UInt8(ascii: "/") }

    /// The last '/'-separated segment of `path`.
    public static func lastComponent(_ path: String) -> String {
        segments(path).last ?? path
    }
}
