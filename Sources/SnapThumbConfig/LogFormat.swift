import Foundation
import SnapThumbCore
import Logging

/// How log lines are written: `text` for people, `json` (one object per line) for log shippers.
public enum LogFormat: String, Sendable, CaseIterable {
    case text, json
}

/// SnapThumb's swift-log handler: one line per event on stderr, written with one `write`.
///
/// - `json`: `{"ts":"2026-11-23T09:10:00.123Z","level":"info","msg":"processed","label":"snapthumb.watch",
///   "snap.key":"a.jpg",…}`: `ts` is RFC 3339 UTC with milliseconds; metadata become fields (nested
///   dictionaries and arrays stay JSON objects and arrays).
/// - `text`: `2026-11-23T09:10:00.123Z info snapthumb.watch: processed snap.key=a.jpg snap.error="not an image"`:
///   values with spaces, quotes, `=` or control characters (or empty ones) are quoted, JSON style.
///
/// No maintained swift-log handler in the package mirror writes this (see docs/design.md), and the
/// format is small enough that a handler of our own is simpler than a dependency.
public struct SnapLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let format: LogFormat
    private let sink: @Sendable (String) -> Void

    public init(label: String, format: LogFormat, level: Logger.Level,
                sink: @escaping @Sendable (String) -> Void = SnapLogHandler.standardError) {
        self.label = label
        self.format = format
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        sink(Self.line(format: format, date: Date(), level: event.level, label: label, message: "\(event.message)", metadata: merged))
    }

    /// One formatted line, without its newline.
    public static func line(format: LogFormat, date: Date, level: Logger.Level, label: String, message: String,
                            metadata: Logger.Metadata) -> String {
        let ts = timestamp(date)
        switch format {
        case .json:
            var fields = ["\"ts\":\(quoted(ts))", "\"level\":\(quoted(level.rawValue))", "\"msg\":\(quoted(message))",
                          "\"label\":\(quoted(label))"]
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) where !["ts", "level", "msg", "label"].contains(key) {
                fields.append("\(quoted(key)):\(json(value))")
            }
            return "{" + fields.joined(separator: ",") + "}"
        case .text:
            var line = "\(ts) \(level.rawValue) \(label): \(message)"
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                line += " \(key)=\(textValue(value))"
            }
            return line
        }
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-23T09:10:00.123Z`.
    public static func timestamp(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let ms = Int(millis - seconds * 1000)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        let year = Int(yoe + era * 400 + (month <= 2 ? 1 : 0))
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, month, day,
                      secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60, ms)
    }

    private static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return quoted(s)
        case .stringConvertible(let c):
            // Numbers and booleans stay JSON numbers and booleans (`.number`, `.flag`), so a log
            // pipeline can sum and compare them; a string that looks like a number stays a string.
            switch c {
            case let b as Bool: return b ? "true" : "false"
            case let i as any BinaryInteger: return "\(i)"
            case let d as Double: return d.isFinite ? "\(d)" : "null"
            case let f as Float: return f.isFinite ? "\(f)" : "null"
            default: return quoted(c.description)
            }
        case .array(let items): return "[" + items.map(json).joined(separator: ",") + "]"
        case .dictionary(let d):
            return "{" + d.sorted { $0.key < $1.key }.map { "\(quoted($0.key)):\(json($0.value))" }.joined(separator: ",") + "}"
        }
    }

    private static func textValue(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return textScalar(s)
        case .stringConvertible(let c): return textScalar(c.description)
        case .array, .dictionary: return textScalar(json(value))
        }
    }

    private static func textScalar(_ s: String) -> String {
        let plain = !s.isEmpty && !s.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.value < 0x20 || $0.value == 0x7F }
        return plain ? s : quoted(s)
    }

    /// A JSON string literal.
    public static func quoted(_ s: String) -> String { JSONText.quoted(s) }

    /// Writes a line and its newline to stderr in one call (lines of concurrent threads do not interleave).
    public static let standardError: @Sendable (String) -> Void = { line in
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}

extension Logger.MetadataValue {
    /// A count: a JSON number in JSON logs, plain digits in text.
    public static func number(_ value: Int) -> Logger.MetadataValue { .stringConvertible(value) }

    /// A measurement rounded to `places` decimals (`0.2`): a JSON number in JSON logs.
    public static func number(_ value: Double, places: Int = 1) -> Logger.MetadataValue {
        let scale = pow(10, Double(places))
        return .stringConvertible(value.isFinite ? (value * scale).rounded() / scale : value)
    }

    /// `true` or `false`: a JSON boolean in JSON logs.
    public static func flag(_ value: Bool) -> Logger.MetadataValue { .stringConvertible(value) }
}
