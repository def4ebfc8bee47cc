import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore

/// `snapthumb config`: the effective settings of every subcommand and where each came from.
struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Print the effective settings and where each came from (flag, SNAPTHUMB_* variable, config file, default).",
        discussion: """
        Every setting of every subcommand comes from, in this order: its flag, its SNAPTHUMB_<FLAG> environment variable (--poll-interval is SNAPTHUMB_POLL_INTERVAL), the config file (--config or SNAPTHUMB_CONFIG: JSON with sections pipeline, store, watch, consume, backfill, log, s3, sqs, google), then the default. How buckets, queues and Google are reached comes from the variables the AWS and Google tools read (AWS_REGION, AWS_ENDPOINT_URL_S3, GOOGLE_APPLICATION_CREDENTIALS, …), then the s3, sqs and google sections; keys and tokens only from the environment, and shown as (set), never printed. Give the same flags as the command you mean, e.g. 'snapthumb config --budget 3000'.
        """
    )

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp("Store directory.", valueName: "dir"))
    var store: String?

    @Option(name: [.customShort("j"), .long], parsing: .unconditional, help: ArgumentHelp("Images processed at once (backfill and watch).", valueName: "n"))
    var jobs: String?

    @Flag(name: .long, help: "One JSON object: {\"<setting>\": {\"value\": …, \"source\": …}}.")
    var json = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    func run() throws {
        let layers = try pipelineOptions.layers()
        var rows: [(name: String, value: String, source: String)] = []
        if let file = layers.file { rows.append(("config", file.path, layers.flags["config"] != nil || pipelineOptions.config != nil ? "--config" : "SNAPTHUMB_CONFIG")) }
        let (_, pipelineRows) = try pipelineOptions.resolve(layers)
        rows += pipelineRows.map { ($0.name, $0.value, $0.source.description) }
        let backfill = try BackfillCommand.resolve(store: store, jobs: jobs, report: nil, progressInterval: nil, isolation: nil,
                                                   printManifests: false, layers: layers, requireStore: false)
        rows += backfill.shown.map { ($0.name, $0.value, $0.source.description) }
        var watchFlags: [String: String] = ["store": backfill.store.isEmpty ? "(none)" : backfill.store]
        if let jobs { watchFlags["jobs"] = jobs }
        if let level = logging.levelFlag { watchFlags["log-level"] = level }
        if let format = logging.logFormat { watchFlags["log-format"] = format }
        let watch = try WatchCommand.configuration(uploadDirectory: "", flags: watchFlags, layers: layers)
        let storeSource = backfill.sources["store"]?.description ?? "default"
        rows += watch.shown.filter { $0.name != "watch.store" }.map { row in
            (row.name, row.value, row.name == "watch.jobs" && jobs == nil ? (watch.sources["jobs"] ?? "default") : row.source)
        }
        _ = storeSource
        let section = layers.file.map { (format: $0.sections["log"]?["format"], level: $0.sections["log"]?["level"], path: $0.path) }
        let (format, level) = try logging.resolve(environment: layers.environment, file: section)
        rows.append(("log.format", format.rawValue, logSource(flag: logging.logFormat != nil ? "--log-format" : nil, env: "SNAPTHUMB_LOG_FORMAT", key: "format", layers)))
        rows.append(("log.level", level.rawValue, logSource(flag: logging.levelFlag != nil ? "--log-level" : nil, env: "SNAPTHUMB_LOG_LEVEL", key: "level", layers)))
        let cloud = try StoreArgument.cloud(layers)
        rows += cloud.shown.map { ($0.name, $0.value, $0.source.description) }

        if json {
            var object: [String: [String: JSONValue]] = [:]
            for row in rows { object[row.name] = ["value": Self.typed(row.name, row.value), "source": .string(row.source)] }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            printOut(String(decoding: try encoder.encode(object), as: UTF8.self))
            return
        }
        let width = rows.map(\.name.count).max() ?? 0
        let valueWidth = min(40, rows.map(\.value.count).max() ?? 0)
        for row in rows {
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let value = row.value.count >= valueWidth ? row.value : row.value.padding(toLength: valueWidth, withPad: " ", startingAt: 0)
            printOut("\(name)  \(value)  (\(row.source))")
        }
    }

    /// A value of `config --json` as the config file writes it: counts are numbers, switches
    /// booleans, an absent budget, file or shard null, the rest (durations, names, chroma) strings.
    enum JSONValue: Encodable, Equatable {
        case string(String), number(Int), bool(Bool), null

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let s): try container.encode(s)
            case .number(let n): try container.encode(n)
            case .bool(let b): try container.encode(b)
            case .null: try container.encodeNil()
            }
        }
    }

    /// Settings whose digits are a name, not a number (`"chroma": "444"`).
    static let textual = Set(["pipeline.square.chroma", "watch.workerId", "watch.listen", "store.path", "config"])
        .union(CloudSettings().shown.map(\.name)).subtracting(["s3.pathStyle", "s3.maxAttempts"])
    /// Settings shown as `none` (or `(none)`) when unset.
    static let nullable = Set(["pipeline.square.budget", "pipeline.pixel.budget", "pipeline.pixel.gridBudget",
                               "backfill.report", "backfill.shard", "watch.metricsFile", "watch.listen", "store.path"])
        .union(CloudSettings().shown.map(\.name))

    static func typed(_ name: String, _ value: String) -> JSONValue {
        if nullable.contains(name), value == "none" || value == "(none)" { return .null }
        if textual.contains(name) { return .string(value) }
        if value == "true" || value == "false" { return .bool(value == "true") }
        if let number = Int(value) { return .number(number) }
        return .string(value)
    }

    private func logSource(flag: String?, env: String, key: String, _ layers: ConfigLayers) -> String {
        if let flag { return flag }
        if layers.environment[env].map({ !$0.isEmpty }) == true { return env }
        if let file = layers.file, file.sections["log"]?[key] != nil { return "log.\(key) in \(file.path)" }
        return "default"
    }
}
