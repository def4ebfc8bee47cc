import Logging
import Synchronization

/// What a logger writes, kept in memory for tests that run a service in this process: one
/// line per entry, `level message key=value…` (the handler's and the entry's metadata, sorted
/// by key), from trace up.
public final class CapturedLog: Sendable {
    private let entries = Mutex<[String]>([])

    public init() {}

    /// A logger whose every entry lands here.
    public var logger: Logger { Logger(label: "test") { _ in Handler(log: self) } }

    /// The lines so far, oldest first.
    public var lines: [String] { entries.withLock { $0 } }

    /// The lines so far, one per line.
    public var text: String { lines.joined(separator: "\n") }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
            let fields = self.metadata.merging(metadata ?? [:]) { $1 }.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
            log.entries.withLock { $0.append("\(level) \(message)\(fields)") }
        }
    }
}
