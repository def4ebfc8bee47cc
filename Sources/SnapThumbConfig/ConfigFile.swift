import Foundation
import SnapThumbCore

/// The one config file every subcommand reads (`--config` or `SNAPTHUMB_CONFIG`): JSON with a
/// section per concern. Every field is optional; an unknown section or setting is an error.
///
/// ```json
/// { "pipeline": { "square": { "budget": 4096 }, "pixel": { "palette": "pico8" } },
///   "store":    { "path": "/srv/store" },
///   "watch":    { "jobs": 2, "drainTimeout": "25s", "listen": "127.0.0.1:9090" },
///   "consume":  { "source": "s3://uploads/snaps/", "listen": "0.0.0.0:9090" },
///   "backfill": { "jobs": 2, "progressInterval": "10s" },
///   "log":      { "format": "json", "level": "info" } }
/// ```
///
/// Buckets, queues and Google read the sections `s3`, `sqs` and `google` (`CloudSettings`),
/// after the variables the AWS and Google tools read.
///
/// Files written before sections existed keep working: pipeline fields (`square`, `pixel`,
/// `limits`, …) may sit at the top level, and `watch.store` names the store.
public struct ConfigFile: Sendable {
    public let path: String
    /// Defaults overlaid with the file's pipeline settings (validated later, with flags and environment).
    public let pipeline: Settings
    /// The pipeline settings the file sets, as dotted names (`square.budget`), for `snapthumb config`.
    public let pipelineKeys: Set<String>
    /// The scalar settings of the other sections, as text: `sections["watch"]?["drainTimeout"]`.
    public let sections: [String: [String: String]]
    /// Where each key is in the file (`pipeline.square.budget` → 3:32), for messages.
    public let positions: [String: StrictJSON.Position]

    /// `<path>:<line>:<column>` of a key (dotted path), or the path alone when it is not known.
    public func place(_ keyPath: String) -> String {
        Self.place(path, positions, keyPath)
    }

    static func place(_ path: String, _ positions: [String: StrictJSON.Position], _ keyPath: String) -> String {
        positions[keyPath].map { "\(path):\($0)" } ?? path
    }

    /// The sections besides `pipeline`, with the settings each accepts.
    public static let knownSettings: [String: [String]] = [
        "store": ["path", "allowUnconditionalWrites"],
        "backfill": ["jobs", "isolation", "progressInterval", "report", "printManifests", "shard"],
        "log": ["format", "level"],
        "s3": CloudSettings.fileSettings["s3"]!,
        "sqs": CloudSettings.fileSettings["sqs"]!,
        "google": CloudSettings.fileSettings["google"]!,
        "consume": ["source", "jobs", "deadLetterQueue", "deadLetterTopic", "visibilityTimeout", "imageTimeout",
                    "drainTimeout", "workerId", "metricsFile", "metricsInterval", "listen"],
        // "watch" is checked by the watch command, which knows its settings.
    ]

    static let pipelineFields: Set<String> = ["limits", "failOn", "background", "budgetMode", "payloadLimit", "payloadReserve",
                                              "onConflict", "square", "pixel"]

    /// A file's sections given directly (the pipeline settings are the defaults): for
    /// callers that hold them already, and tests.
    public init(path: String, sections: [String: [String: String]]) {
        self.path = path
        pipeline = Settings()
        pipelineKeys = []
        self.sections = sections
        positions = [:]
    }

    public init(path: String, data: Data, positions: [String: StrictJSON.Position] = [:]) throws {
        self.path = path
        self.positions = positions
        func at(_ keyPath: String) -> String { Self.place(path, positions, keyPath) }
        let root: Any
        do { root = try JSONSerialization.jsonObject(with: data) } catch {
            throw SnapError(.config, "config file \(path) is not valid JSON")
        }
        guard let object = root as? [String: Any] else {
            throw SnapError(.config, "config file \(path) must hold one JSON object of sections (pipeline, store, watch, consume, backfill, log, s3, sqs, google)")
        }
        var pipelineObject: [String: Any] = [:]
        var sections: [String: [String: String]] = [:]
        for (name, value) in object {
            if Self.pipelineFields.contains(name) {
                pipelineObject[name] = value  // the pre-sections layout
                continue
            }
            switch name {
            case "pipeline":
                guard let section = value as? [String: Any] else {
                    throw SnapError(.config, "config file \(path): \"pipeline\" must be an object of pipeline settings")
                }
                for (key, field) in section { pipelineObject[key] = field }
            case "store", "watch", "consume", "backfill", "log", "s3", "sqs", "google":
                guard let section = value as? [String: Any] else {
                    throw SnapError(.config, "config file \(path): \"\(name)\" must be an object of settings")
                }
                let scalars: [String: Scalar]
                do {
                    scalars = try JSONDecoder().decode([String: Scalar].self, from: JSONSerialization.data(withJSONObject: section))
                } catch {
                    throw SnapError(.config, "config file \(path): the settings in \"\(name)\" must be strings, numbers or booleans")
                }
                var values: [String: String] = [:]
                for (key, field) in scalars {
                    if let known = Self.knownSettings[name], !known.contains(key) {
                        throw SnapError(.config, "config file \(at("\(name).\(key)")): unknown setting \(name).\(key); known settings are \(known.joined(separator: ", "))")
                    }
                    values[key] = field.text
                }
                sections[name] = values
            default:
                throw SnapError(.config, "config file \(at(name)): unknown section \"\(name)\"; sections are pipeline, store, watch, consume, backfill, log, s3, sqs, google")
            }
        }
        do {
            let data = try JSONSerialization.data(withJSONObject: pipelineObject)
            pipeline = try JSONDecoder().decode(Settings.self, from: data)
        } catch let error as SnapError {
            // `unknown setting "K" in S` from the pipeline's decoder: name the key's place.
            if let match = error.message.firstMatch(of: /^unknown setting "([^"]+)" in ([a-z]+)/) {
                let (key, section) = (String(match.1), String(match.2))
                let candidates = section == "settings" ? ["pipeline.\(key)", key] : ["pipeline.\(section).\(key)", "\(section).\(key)"]
                if let found = candidates.first(where: { positions[$0] != nil }) {
                    throw SnapError(.config, "config file \(at(found)): unknown setting \(found)\(error.message.dropFirst(match.0.count))")
                }
            }
            throw SnapError(.config, "config file \(path): \(error.message)")
        } catch let DecodingError.typeMismatch(type, context), let DecodingError.valueNotFound(type, context) {
            let name = context.codingPath.map(\.stringValue).joined(separator: ".")
            let expected = type == Bool.self ? "true or false" : type == String.self ? "a string" : "a number"
            throw SnapError(.config, "config file \(path): pipeline.\(name) must be \(expected)")
        } catch {
            throw SnapError(.config, "config file \(path): the pipeline settings cannot be read (\(error.localizedDescription))")
        }
        var keys = Set<String>()
        func flatten(_ value: Any, _ prefix: String) {
            if let object = value as? [String: Any], !object.isEmpty {
                for (k, v) in object { flatten(v, prefix.isEmpty ? k : "\(prefix).\(k)") }
            } else {
                keys.insert(prefix)
            }
        }
        flatten(pipelineObject, "")
        pipelineKeys = keys.subtracting([""])
        self.sections = sections
    }

    /// Reads and parses `path`.
    public static func load(_ path: String) throws -> ConfigFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SnapError(.config, "cannot read config file \(path)")
        }
        // Strict JSON: no trailing commas or duplicate keys; the message names line and column.
        let positions: [String: StrictJSON.Position]
        do { positions = try StrictJSON.check(data) } catch let error as SnapError {
            throw SnapError(.config, "config file \(path):\(error.message)")
        }
        return try ConfigFile(path: path, data: data, positions: positions)
    }

    /// A string, number or boolean, as text.
    struct Scalar: Decodable {
        var text: String
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let b = try? c.decode(Bool.self) { text = b ? "true" : "false" }
            else if let i = try? c.decode(Int.self) { text = String(i) }
            else if let d = try? c.decode(Double.self) { text = String(d) }
            else { text = try c.decode(String.self) }
        }
    }
}

/// Where a setting's value came from, for messages and `snapthumb config`.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    case flag(String)
    case environment(String)
    case file(path: String, key: String)
    case defaultValue

    public var description: String {
        switch self {
        case .flag(let name): return name
        case .environment(let name): return name
        case .file(let path, let key): return "\(key) in \(path)"
        case .defaultValue: return "default"
        }
    }
}

/// The layers every subcommand reads, in order: flags, then `SNAPTHUMB_*` environment variables,
/// then the config file, then the defaults.
public struct ConfigLayers: Sendable {
    /// Values given on the command line, by flag name without dashes (`"jobs"`).
    public var flags: [String: String]
    public var environment: [String: String]
    public var file: ConfigFile?

    public init(flags: [String: String], environment: [String: String], file: ConfigFile?) {
        self.flags = flags
        self.environment = environment
        self.file = file
    }

    /// `--poll-interval` is `SNAPTHUMB_POLL_INTERVAL`.
    public static func environmentName(_ flag: String) -> String {
        "SNAPTHUMB_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// The config file named by `--config` (given as `flag`) or `SNAPTHUMB_CONFIG`, if any.
    public static func loadFile(flag: String?, environment: [String: String]) throws -> ConfigFile? {
        guard let path = flag ?? environment["SNAPTHUMB_CONFIG"].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
        return try ConfigFile.load(path)
    }

    /// The winning text for a setting and where it came from: `--flag`, `SNAPTHUMB_FLAG`, then the
    /// first of `fileKeys` (`(section, key)`) the file sets.
    public func lookup(_ flag: String, file fileKeys: [(String, String)] = []) -> (text: String, source: SettingSource)? {
        if let value = flags[flag] { return (value, .flag("--\(flag)")) }
        let env = Self.environmentName(flag)
        if let value = environment[env] { return (value, .environment(env)) }
        if let file {
            for (section, key) in fileKeys {
                if let value = file.sections[section]?[key] { return (value, .file(path: file.path, key: "\(section).\(key)")) }
            }
        }
        return nil
    }

    /// The winning text for a setting that has no flag of its own and whose environment
    /// variables are the ones other tools already read (`AWS_REGION`, then
    /// `AWS_DEFAULT_REGION`): the first of `names` that is set and not empty, then the first
    /// of `fileKeys` the file sets.
    public func lookup(environment names: [String], file fileKeys: [(String, String)] = []) -> (text: String, source: SettingSource)? {
        for name in names {
            if let value = environment[name], !value.isEmpty { return (value, .environment(name)) }
        }
        if let file {
            for (section, key) in fileKeys {
                if let value = file.sections[section]?[key] { return (value, .file(path: file.path, key: "\(section).\(key)")) }
            }
        }
        return nil
    }
}

/// true/false (also 1/0, yes/no, on/off), with a message that names the source.
public func parseSwitch(_ text: String, source: SettingSource) throws -> Bool {
    switch text.lowercased() {
    case "1", "true", "yes", "on": return true
    case "0", "false", "no", "off": return false
    default: throw SnapError(.config, "\(source) must be true or false (got '\(text)')")
    }
}

/// One duration syntax everywhere: `500ms`, `10s`, `5m`, `2h`, `7d`, or plain seconds (`1.5`).
public func parseDuration(_ text: String) -> Double? {
    let t = text.trimmingCharacters(in: .whitespaces).lowercased()
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400)]
    for (suffix, scale) in units where t.hasSuffix(suffix) {
        if let v = Double(t.dropLast(suffix.count)), v.isFinite, v >= 0 { return v * scale }
    }
    if let v = Double(t), v.isFinite, v >= 0 { return v }
    return nil
}

/// Parses a whole number of at least `minimum`, with a message that names the source.
public func parseCount(_ text: String, minimum: Int, source: SettingSource) throws -> Int {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    guard let value = Int(trimmed) else {
        throw SnapError(.config, "\(source) must be a whole number (got '\(text)')")
    }
    guard value >= minimum else {
        let what = value < 0 ? "cannot be negative" : value == 0 ? "cannot be zero" : "is too small"
        throw SnapError(.config, "\(source) \(what): it must be at least \(minimum) (got \(value))")
    }
    return value
}

/// A duration in the same syntax `parseDuration` reads: `7d`, `25s`, `500ms`, `1.5s`.
public func formatDuration(_ seconds: Double) -> String {
    for (unit, scale) in [("d", 86_400.0), ("h", 3600), ("m", 60), ("s", 1)] where seconds >= scale && seconds.truncatingRemainder(dividingBy: scale) == 0 {
        return "\(Int(seconds / scale))\(unit)"
    }
    if seconds == 0 { return "0s" }
    if seconds < 1, (seconds * 1000).rounded() == seconds * 1000 { return "\(Int(seconds * 1000))ms" }
    return "\(seconds)s"
}
