import ArgumentParser
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit
import Synchronization

/// `--log-format`, `--log-level`, `-q` and `-v`, on every subcommand.
struct LoggingOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("text, or json (one object per line, for log shippers). [default: text; env SNAPTHUMB_LOG_FORMAT]", valueName: "format"), completion: Completions.logFormat)
    var logFormat: String?

    @Option(name: .long, help: ArgumentHelp("trace, debug, info, notice, warning, error or critical. [default: info; env SNAPTHUMB_LOG_LEVEL]", valueName: "level"), completion: Completions.logLevel)
    var logLevel: String?

    @Flag(name: [.customShort("q"), .long], help: "Only failures and errors (the same as --log-level warning).")
    var quiet = false

    @Flag(name: [.customShort("v"), .long], help: "More detail (the same as --log-level debug).")
    var verbose = false

    func validate() throws {
        if quiet && verbose { throw ValidationError("-q (--quiet) and -v (--verbose) cannot be used together") }
        if logLevel != nil && (quiet || verbose) {
            throw ValidationError("--log-level cannot be combined with \(quiet ? "-q (--quiet)" : "-v (--verbose)"): pick one")
        }
    }

    /// The flag's spelling of the level, if any flag set it (for the watch configuration's precedence).
    var levelFlag: String? {
        if let logLevel { return logLevel }
        if quiet { return "warning" }
        if verbose { return "debug" }
        return nil
    }

    /// Resolves format and level from these flags, then SNAPTHUMB_LOG_FORMAT / SNAPTHUMB_LOG_LEVEL,
    /// then `file` (the config file's values), then the defaults (text, info).
    func resolve(environment: [String: String] = ProcessEnvironment.values,
                 file: (format: String?, level: String?, path: String)? = nil) throws -> (LogFormat, Logger.Level) {
        // The one precedence (ConfigLayers): flag, SNAPTHUMB_LOG_*, the file's log section, the
        // default. An empty variable counts as unset, as it always has for logging.
        var flags: [String: String] = [:]
        if let logFormat { flags["log-format"] = logFormat }
        if let levelFlag { flags["log-level"] = levelFlag }
        var sections: [String: String] = [:]
        if let format = file?.format { sections["format"] = format }
        if let level = file?.level { sections["level"] = level }
        let layers = ConfigLayers(flags: flags, environment: environment.filter { !$0.value.isEmpty },
                                  file: file.map { ConfigFile(path: $0.path, sections: ["log": sections]) })
        func pick(_ flag: String, _ fileKey: String) -> (String, String)? {
            guard let (text, source) = layers.lookup(flag, file: [("log", fileKey)]) else { return nil }
            // -q and -v set the level too: name the flag that was given.
            if flag == "log-level", case .flag = source, logLevel == nil { return (text, quiet ? "-q" : "-v") }
            return (text, source.description)
        }
        var format = LogFormat.text
        if let (text, source) = pick("log-format", "format") {
            guard let value = LogFormat(rawValue: text.lowercased()) else {
                throw ValidationError("\(source) must be text or json (got '\(text)')")
            }
            format = value
        }
        var level = Logger.Level.info
        if let (text, source) = pick("log-level", "level") {
            guard let value = Logger.Level(rawValue: text.lowercased()) else {
                throw ValidationError("\(source) must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(text)')")
            }
            level = value
        }
        return (format, level)
    }

    /// Points swift-log at SnapThumb's handler and sets up `Console` (call once, first thing in `run`).
    func bootstrap(file: ConfigFile? = nil) throws {
        let section = file.map { (format: $0.sections["log"]?["format"], level: $0.sections["log"]?["level"], path: $0.path) }
        let (format, level) = try resolve(file: section)
        Console.configure(format: format, level: level)
    }
}

/// What a command tells its user on stderr, in text (the documented plain lines) or as JSON log
/// lines, filtered by the log level.
enum Console {
    private static let state = Mutex(State())

    private struct State {
        var format = LogFormat.text
        var level = Logger.Level.info
        var logger = Logger(label: "snapthumb")
        var deferred: [String] = []
    }

    static func configure(format: LogFormat, level: Logger.Level) {
        state.withLock { state in
            state.format = format
            state.level = level
        }
        LoggingSystem.bootstrap { label in SnapLogHandler(label: label, format: format, level: level) }
        state.withLock { $0.logger = Logger(label: "snapthumb") }
        flushDeferred()
        if let note = Vips.jpegDecodingNote {
            state.withLock { $0.logger }.warning("\(note)", metadata: ["snap.libjpeg": "\(Vips.jpegRuntimeVersion)"])
        }
    }

    /// Warnings found before logging is set up (unknown SNAPTHUMB_* variables): said once, in
    /// the log format, when a command configures logging, or at exit by one that does not.
    static func `defer`(_ warnings: [String]) {
        state.withLock { $0.deferred += warnings }
    }

    static func flushDeferred() {
        let warnings = state.withLock { state in
            defer { state.deferred = [] }
            return state.deferred
        }
        for warning in warnings { say(warning, event: "warning", level: .warning, metadata: ["snap.warning": "\(warning)"]) }
    }

    static var format: LogFormat { state.withLock { $0.format } }
    static var level: Logger.Level { state.withLock { $0.level } }
    static var logger: Logger { state.withLock { $0.logger } }

    /// One failed input: `<subject>: <code>: <message>` in text (a contract), or a JSON line.
    static func failure(_ subject: String, code: String, message: String) {
        if format == .json {
            logger.warning("failed", metadata: ["snap.file": "\(subject)", "snap.code": "\(code)", "snap.error": "\(message)"])
        } else if level <= .warning {
            printError("\(subject): \(code): \(message)")
        }
    }

    /// A line for the user (summaries, notes): printed as is in text, a log event in JSON.
    /// `event` is the JSON line's `msg` when the text is long (the fields carry the numbers).
    static func say(_ text: String, event: String? = nil, level eventLevel: Logger.Level = .notice, metadata: Logger.Metadata = [:]) {
        if format == .json {
            logger.log(level: eventLevel, "\(event ?? text)", metadata: metadata)
        } else if level <= eventLevel {
            printError(wrapped(text))
        }
    }

    /// On a terminal, lines longer than its width are wrapped at spaces (continuations indented),
    /// so a summary never breaks mid-word; elsewhere text is left as it is.
    static func wrapped(_ text: String, columns: Int? = isatty(STDERR_FILENO) == 1 ? POSIX.terminalColumns(STDERR_FILENO) : nil) -> String {
        guard let columns, columns >= 20 else { return text }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            var out: [String] = []
            var current = ""
            for word in line.split(separator: " ", omittingEmptySubsequences: false) {
                let candidate = current.isEmpty ? String(word) : current + " " + word
                if candidate.count <= columns - 1 || current.trimmingCharacters(in: .whitespaces).isEmpty {
                    current = candidate
                } else {
                    out.append(current)
                    current = "  " + word
                }
            }
            out.append(current)
            return out.joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
