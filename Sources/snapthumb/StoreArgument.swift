import ArgumentParser
import Foundation
import Logging
import SnapThumbCore
import SnapThumbS3

/// `--store` for every command: a directory path or `s3://BUCKET/PREFIX`.
enum StoreArgument {
    /// The store's notices (a replaced manifest) for commands that do not set up
    /// logging: on stderr, never stdout (manifests, or a worker's line protocol, go there).
    static let stderrLogger = Logger(label: "snapthumb.store") { StreamLogHandler.standardError(label: $0) }

    static let help = "Store: a directory (created if missing) or s3://BUCKET/PREFIX (credentials and endpoint from the AWS_* environment variables; see README, Storing in a bucket)."

    /// A usage error (exit 2) for anything that is neither a path nor an s3 URL.
    static func validate(_ argument: String) throws {
        do { try StoreLocation.check(argument) } catch let error as SnapError {
            throw ValidationError("--store: \(error.message)")
        }
    }

    /// Opens the store, checking a bucket's access once before anything is
    /// claimed or written: a missing bucket or refused credentials exit 2.
    static func open(_ argument: String, onConflict: ConflictPolicy = .refuse, logger: Logger = stderrLogger) throws -> any StoreBackend {
        do {
            return try StoreLocation.open(argument, onConflict: onConflict, logger: logger)
        } catch let error as SnapError {
            // Messages from the bucket backend already start with the store's URL.
            let message = error.message.hasPrefix("s3://") ? error.message : "\(RedactedURL.text(argument)): \(error.message)"
            printError("\(error.code.rawValue): \(message)")
            throw ExitCode(error.code == .config ? 2 : 1)
        }
    }
}
