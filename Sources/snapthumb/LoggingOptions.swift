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
        func pick(_ flag: String?, _ flagName: String, _ env: String, _ fileValue: String?, _ fileKey: String) -> (String, String)? {
            if let flag { return (flag, flagName) }
            if let value = environment[env], !value.isEmpty { return (value, env) }
            if let file, let fileValue { return (fileValue, "\(fileKey) in \(file.path)") }
            return nil
        }
        var format = LogFormat.text
        if let (text, source) = pick(logFormat, "--log-format", "SNAPTHUMB_LOG_FORMAT", file?.format, "log.format") {
            guard let value = LogFormat(rawValue: text.lowercased()) else {
                throw ValidationError("\(source) must be text or json (got '\(text)')")
            }
            format = value
        }
        var level = Logger.Level.info
        if let (text, source) = pick(levelFlag, quiet ? "-q" : verbose ? "-v" : "--log-level", "SNAPTHUMB_LOG_LEVEL", file?.level, "log.level") {
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
