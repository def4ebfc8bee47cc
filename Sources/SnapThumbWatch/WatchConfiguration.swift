import Foundation
import SystemKit
import SnapThumbCore
import SnapThumbStore
import Logging
import SnapThumbConfig
import SnapThumbRunner

/// Everything `snapthumb watch` can be told, with its defaults. Built once by
/// `resolve` from flags, `SNAPTHUMB_*` environment variables and the `watch`
/// object of the config file (flags win, then the environment, then the file),
/// and validated there with messages that say what to change.
public struct WatchConfiguration: Sendable {
    /// What happens to a source once its manifest is published: moved to `done/`, or deleted.
    public enum AfterSuccess: String, Sendable { case move, delete }

    /// The directory holding `incoming/`, `processing/`, `done/`, `failed/`.
    public var uploadDirectory: String
    /// The store root (as for `process`).
    public var store: String
    /// Images processed at once, each on its own thread.
    public var jobs = ProcessInfo.processInfo.activeProcessorCount
    /// The name of this worker's claim directory; nil means `<host>.<pid>`.
    public var workerID: String?
    /// Create the upload directory if it is missing (otherwise that is a start-up error: a typo must not
    /// start a worker that watches an empty directory nobody writes to).
    public var create = false
    /// Rescan every `pollInterval` instead of using inotify (NFS and other network file systems).
    public var poll = false
    public var pollInterval = 2.0
    /// A file written in place is taken once its size and mtime were stable this long.
    public var settle = 1.0
    /// A full rescan of `incoming/` this often, as a safety net for lost events.
    public var rescanInterval = 60.0
    /// Per-image time limit; slower images are quarantined as `timeout`.
    public var imageTimeout = 10.0
    /// On SIGTERM, how long images in flight may finish before their claims are returned.
    public var drainTimeout = 25.0
    /// Claims of a worker on another host go back to `incoming/` when its lease is this old.
    public var leaseTimeout = 60.0
    /// Deaths of the isolated child process on one upload (taken over from a dead
    /// worker) before it is quarantined as `poison`.
    public var maxAttempts = 3
    /// Keep processed sources in `done/`, or delete them.
    public var afterSuccess = AfterSuccess.move
    /// How long `done/` keeps sources; 0 keeps them forever.
    public var doneRetention = 7 * 86_400.0
    /// Prometheus textfile (node_exporter's textfile collector), rewritten atomically.
    public var metricsFile: String?
    /// How often the metrics file is rewritten.
    public var metricsInterval = 5.0
    /// Where `/healthz`, `/readyz` and `/metrics` are served; nil: not served.
    public var listen: ListenAddress?
    /// The lowest level logged.
    public var logLevel = Logger.Level.info
    /// Log lines as text or JSON objects.
    public var logFormat = LogFormat.text
    /// Names held in memory at once, whatever the backlog.
    public var queueCapacity = 4096
    /// Where each setting given came from (`--jobs`, `SNAPTHUMB_JOBS`, `watch.jobs in <file>`), by its config name.
    public var sources: [String: String] = [:]

    /// Every setting with its effective value and source, for `snapthumb config`.
    public var shown: [(name: String, value: String, source: String)] {
        func d(_ seconds: Double) -> String { formatDuration(seconds) }
        let values: [(String, String)] = [
            ("store", store), ("jobs", "\(jobs)"), ("workerId", workerID ?? "<host>.<pid>"), ("create", "\(create)"), ("poll", "\(poll)"),
            ("pollInterval", d(pollInterval)), ("settle", d(settle)), ("rescanInterval", d(rescanInterval)),
            ("imageTimeout", d(imageTimeout)), ("drainTimeout", d(drainTimeout)), ("leaseTimeout", d(leaseTimeout)),
            ("maxAttempts", "\(maxAttempts)"), ("afterSuccess", afterSuccess.rawValue), ("doneRetention", d(doneRetention)),
            ("metricsFile", metricsFile ?? "none"), ("metricsInterval", d(metricsInterval)),
            ("listen", listen?.description ?? "none"), ("logLevel", logLevel.rawValue),
            ("logFormat", logFormat.rawValue), ("queueCapacity", "\(queueCapacity)"),
        ]
        return values.map { (name: "watch.\($0.0)", value: $0.1, source: sources[$0.0] ?? "default") }
    }

    /// Defaults for everything but the two directories.
    public init(uploadDirectory: String, store: String) {
        self.uploadDirectory = uploadDirectory
        self.store = store
    }

    /// One setting's spelling in each source.
    struct Key {
        let flag: String
        let json: String
        var env: String { "SNAPTHUMB_" + flag.uppercased().replacingOccurrences(of: "-", with: "_") }
    }

    static let keys: [Key] = [
        "store", "jobs", "worker-id", "create", "poll", "poll-interval", "settle", "rescan-interval", "image-timeout",
        "drain-timeout", "lease-timeout", "max-attempts", "after-success", "done-retention", "metrics-file",
        "metrics-interval", "listen", "log-level", "log-format", "queue-capacity",
    ].map { flag in
        let parts = flag.split(separator: "-")
        return Key(flag: flag, json: parts[0] + parts.dropFirst().map { $0.capitalized }.joined())
    }

    /// Builds the configuration from its three sources.
    /// - Parameters:
    ///   - flags: values given on the command line, by flag name without dashes (`"poll-interval"`).
    ///   - environment: the process environment (only `SNAPTHUMB_*` names are read).
    ///   - file: the config file's `watch` object, by JSON name (`"pollInterval"`), and its path.
    public static func resolve(uploadDirectory: String, flags: [String: String], environment: [String: String],
                               file: (path: String, values: [String: String])?,
                               storeInFile: String? = nil) throws -> WatchConfiguration {
        var sections: [String: [String: String]] = [:]
        if let file { sections["watch"] = file.values }
        if let storeInFile { sections["store"] = ["path": storeInFile] }
        return try resolve(uploadDirectory: uploadDirectory,
                           layers: ConfigLayers(flags: flags, environment: environment,
                                                file: file.map { ConfigFile(path: $0.path, sections: sections) }))
    }

    /// Builds the configuration from the layers every subcommand reads (`ConfigLayers`: flags,
    /// then `SNAPTHUMB_*`, then the config file's `watch` section, with `store.path` and the
    /// `log` section, then the defaults): the same precedence as every other setting.
    public static func resolve(uploadDirectory: String, layers: ConfigLayers) throws -> WatchConfiguration {
        if let file = layers.file, let values = file.sections["watch"] {
            let known = Set(keys.map(\.json))
            if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) {
                throw WatchConfigError("config file \(file.path): unknown setting watch.\(unknown); known settings are \(keys.map(\.json).joined(separator: ", "))")
            }
        }
        var sources: [String: String] = [:]
        /// The winning value and a phrase naming where it came from.
        func lookup(_ key: Key) -> (String, String)? {
            var fileKeys = [("watch", key.json)]
            switch key.flag {
            case "store": fileKeys.append(("store", "path"))
            case "log-format": fileKeys.append(("log", "format"))
            case "log-level": fileKeys.append(("log", "level"))
            default: break
            }
            guard let (text, source) = layers.lookup(key.flag, file: fileKeys) else { return nil }
            sources[key.json] = source.description
            return (text, source.description)
        }
        func key(_ flag: String) -> Key { keys.first { $0.flag == flag }! }

        guard let store = lookup(key("store"))?.0, !store.isEmpty else {
            throw WatchConfigError("no store given: pass --store <dir>, set SNAPTHUMB_STORE, or set store.path in the config file")
        }
        var c = WatchConfiguration(uploadDirectory: uploadDirectory, store: store)

        func integer(_ flag: String, min minimum: Int, into path: WritableKeyPath<WatchConfiguration, Int>) throws {
            guard let (text, source) = lookup(key(flag)) else { return }
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value >= minimum else {
                throw WatchConfigError("\(source) must be a whole number of at least \(minimum) (got '\(text)')")
            }
            c[keyPath: path] = value
        }
        func duration(_ flag: String, allowZero: Bool = false, into path: WritableKeyPath<WatchConfiguration, Double>) throws {
            guard let (text, source) = lookup(key(flag)) else { return }
            guard let value = parseDuration(text), value > 0 || (allowZero && value == 0) else {
                throw WatchConfigError("\(source) must be a \(allowZero ? "" : "positive ")duration such as 500ms, 10s, 5m, 2h or 7d (got '\(text)')")
            }
            c[keyPath: path] = value
        }

        try integer("jobs", min: 1, into: \.jobs)
        try integer("max-attempts", min: 1, into: \.maxAttempts)
        try integer("queue-capacity", min: 16, into: \.queueCapacity)
        try duration("poll-interval", into: \.pollInterval)
        try duration("settle", allowZero: true, into: \.settle)
        try duration("rescan-interval", into: \.rescanInterval)
        try duration("image-timeout", into: \.imageTimeout)
        try duration("drain-timeout", allowZero: true, into: \.drainTimeout)
        try duration("lease-timeout", into: \.leaseTimeout)
        try duration("done-retention", allowZero: true, into: \.doneRetention)
        try duration("metrics-interval", into: \.metricsInterval)

        if let (text, source) = lookup(key("worker-id")) {
            guard !text.isEmpty, !PathBytes.isHidden(text), !text.contains("/"), text.utf8.count <= 200 else {
                throw WatchConfigError("\(source) must be a non-empty name without '/' that does not start with '.' (got '\(text)')")
            }
            c.workerID = text
        }
        for (flag, path) in [("poll", \WatchConfiguration.poll), ("create", \WatchConfiguration.create)] {
            guard let (text, source) = lookup(key(flag)) else { continue }
            switch text.lowercased() {
            case "1", "true", "yes", "on": c[keyPath: path] = true
            case "0", "false", "no", "off", "": c[keyPath: path] = false
            default: throw WatchConfigError("\(source) must be true or false (got '\(text)')")
            }
        }
        if let (text, source) = lookup(key("after-success")) {
            guard let value = AfterSuccess(rawValue: text.lowercased()) else {
                throw WatchConfigError("\(source) must be move (keep sources in done/) or delete (got '\(text)')")
            }
            c.afterSuccess = value
        }
        if let (text, _) = lookup(key("metrics-file")), !text.isEmpty { c.metricsFile = text }
        if let (text, source) = lookup(key("listen")), !text.isEmpty {
            switch ListenAddress.parse(text) {
            case .success(let address): c.listen = address
            case .failure(let error): throw WatchConfigError("\(source) \(error.description)")
            }
        }
        if let (text, source) = lookup(key("log-level")) {
            guard let level = Logger.Level(rawValue: text.lowercased()) else {
                throw WatchConfigError("\(source) must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(text)')")
            }
            c.logLevel = level
        }
        if let (text, source) = lookup(key("log-format")) {
            guard let format = LogFormat(rawValue: text.lowercased()) else {
                throw WatchConfigError("\(source) must be text or json (got '\(text)')")
            }
            c.logFormat = format
        }
        c.sources = sources
        return c
    }

    /// Checks, before any work, the path that must already exist: the upload
    /// directory (unless `create`). The metrics file's directory is optional: see `metricsDirectoryMissing`.
    public func checkPaths() throws {
        if !create, !Self.isDirectory(uploadDirectory) {
            throw WatchConfigError("upload directory \(uploadDirectory) does not exist; create it, or pass --create to have watch create it")
        }
        if let problem = Layout(root: uploadDirectory).unsafeFolder() { throw WatchConfigError(problem) }
    }

    /// A sentence when `metricsFile`'s directory does not exist (no node_exporter on this host):
    /// the worker then runs without the textfile rather than refuse to start and restart-loop.
    public var metricsDirectoryMissing: String? {
        metricsFile.flatMap(DaemonMetrics.textfileDirectoryMissing)
    }

    static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Seconds from "1.5", "500ms", "10s", "5m", "2h" or "7d" (the one duration syntax, `SnapThumbCore.parseDuration`).
    public static func parseDuration(_ text: String) -> Double? { SnapThumbConfig.parseDuration(text) }

    /// How often the lease is renewed, and housekeeping (metrics, dead workers) runs.
    var heartbeatInterval: Double { min(5, leaseTimeout / 3, metricsInterval) }
}

/// A configuration mistake, in a sentence that says what to change.
public struct WatchConfigError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
