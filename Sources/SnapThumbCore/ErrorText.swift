import Foundation
import VipsKit
import SystemKit

/// An error in words for people: no Swift type names (`keyNotFound(CodingKeys(…))`), for messages
/// and logs that operators read.
public func describe(_ error: any Error) -> String {
    switch error {
    case let error as SnapError: return error.message
    case let error as Errno: return error.description
    case let error as VipsError: return error.description
    case DecodingError.keyNotFound(let key, let context):
        return "missing field \(path(context.codingPath + [key]))"
    case DecodingError.typeMismatch(let type, let context), DecodingError.valueNotFound(let type, let context):
        return "field \(path(context.codingPath)) must be \(expected(type))"
    case DecodingError.dataCorrupted(let context):
        return context.codingPath.isEmpty ? "not valid JSON" : "field \(path(context.codingPath)) has an invalid value"
    default:
        return (error as NSError).localizedDescription
    }
}

private func path(_ keys: [any CodingKey]) -> String {
    keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
}

private func expected(_ type: Any.Type) -> String {
    switch type {
    case is Bool.Type: return "true or false"
    case is String.Type: return "a string"
    case is Int.Type, is Double.Type, is Int64.Type, is UInt64.Type: return "a number"
    default: return "of another type"
    }
}

/// URLs as they may be repeated in messages and logs: the userinfo part
/// (`s3://KEY:SECRET@bucket/…`, `https://user:pass@host/…`) replaced by `***`,
/// so that a credential typed into an argument is never echoed.
public enum RedactedURL {
    /// `text` with the userinfo of a `scheme://userinfo@rest` URL replaced by `***`;
    /// anything else unchanged.
    public static func text(_ text: String) -> String {
        guard let userinfo = userinfoRange(text) else { return text }
        return String(text[..<userinfo.lowerBound]) + "***" + String(text[userinfo.upperBound...])
    }

    /// Whether `text` is a URL that carries a userinfo part (`user[:password]@`).
    public static func hasUserinfo(_ text: String) -> Bool { userinfoRange(text) != nil }

    /// The range of the userinfo, between `://` and the last `@` before the first
    /// `/`, `?` or `#` of the authority.
    private static func userinfoRange(_ text: String) -> Range<String.Index>? {
        guard let scheme = text.range(of: "://") else { return nil }
        let authorityEnd = text[scheme.upperBound...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? text.endIndex
        guard let at = text[scheme.upperBound..<authorityEnd].lastIndex(of: "@") else { return nil }
        return scheme.upperBound..<at
    }
}
