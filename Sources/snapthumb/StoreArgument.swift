import ArgumentParser
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbS3

/// `--store` for every command: a directory path or `s3://BUCKET/PREFIX`.
enum StoreArgument {
    /// The kinds of store a URL can name, besides a directory: the bucket store.
    static let schemes: [any StoreScheme] = [S3StoreScheme()]

    /// The store's notices (a replaced manifest) for commands that do not set up
    /// logging: on stderr, never stdout (manifests, or a worker's line protocol, go there).
    static let stderrLogger = Logger(label: "snapthumb.store") { StreamLogHandler.standardError(label: $0) }

    static let help = "Store: a directory (created if missing) or s3://BUCKET/PREFIX (credentials and endpoint from the AWS_* environment variables; see README, Storing in a bucket)."

    /// A usage error (exit 2) for anything that is neither a path nor an s3 URL,
    /// and for a path that exists but is not a directory (a store is created only where nothing is).
    static func validate(_ argument: String) throws {
        do { try StoreLocation.check(argument, schemes: StoreArgument.schemes) } catch let error as SnapError {
            throw ValidationError("--store: \(error.message)")
        }
        if StoreLocation.scheme(for: argument, schemes: schemes) == nil, let isDirectory = isDirectory(argument), !isDirectory {
            throw ValidationError("--store: \(argument) is a file, not a directory; a store is a directory (or s3://BUCKET/PREFIX)")
        }
    }

    /// For commands that read a store (`verify`, `ls`, `get`, `gc`): a usage error
    /// (exit 2) unless it is an s3 URL or an existing directory; nothing is created.
    static func validateExisting(_ argument: String) throws {
        do { try StoreLocation.check(argument, schemes: StoreArgument.schemes) } catch let error as SnapError {
            throw ValidationError("<store>: \(error.message)")
        }
        guard StoreLocation.scheme(for: argument, schemes: schemes) == nil else { return }
        switch isDirectory(argument) {
        case nil: throw ValidationError("<store>: \(argument) does not exist")
        case false?: throw ValidationError("<store>: \(argument) is a file, not a store directory")
        case true?: return
        }
    }

    /// Whether the path (symlinks followed) is a directory; nil when nothing is there.
    static func isDirectory(_ path: String) -> Bool? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return nil }
        return isDirectory.boolValue
    }

    /// A store to read (`ls`, `get`, `gc`, `verify`), opened by scheme like a writer's: a store
    /// of one of `schemes` (reached once; a missing bucket or refused credentials exit 2) or an
    /// existing directory store; a directory that is not a store is a usage error (exit 2),
    /// unless `requireLayout` is false (`verify` reports what is missing instead).
    static func openInventory(_ argument: String, requireLayout: Bool = true) throws -> any StoreInventory {
        guard StoreLocation.scheme(for: argument, schemes: schemes) != nil else {
            do { return try StoreLocation.openInventory(argument, schemes: schemes, requireLayout: requireLayout) } catch let error as SnapError {
                printError("Error: \(error.message)")
                throw ExitCode(2)
            }
        }
        let cloud = try cloud()
        return try reportingOpenErrors(argument) {
            try StoreLocation.openInventory(argument, schemes: schemes, options: StoreOpenOptions(logger: stderrLogger, cloud: cloud))
        }
    }

    /// Opens the store, checking a bucket's access once before anything is
    /// claimed or written: a missing bucket or refused credentials exit 2.
    /// With `allowUnconditionalWrites` a bucket is not asked to prove that it
    /// honours create-only writes, and a warning says so on every start.
    static func open(_ argument: String, cloud: CloudSettings, onConflict: ConflictPolicy = .refuse, allowUnconditionalWrites: Bool = false,
                     logger: Logger = stderrLogger) throws -> any StoreBackend {
        let store = try reportingOpenErrors(argument) {
            try StoreLocation.open(argument, schemes: StoreArgument.schemes, options: StoreOpenOptions(onConflict: onConflict, allowUnconditionalWrites: allowUnconditionalWrites, logger: logger, cloud: cloud))
        }
        if allowUnconditionalWrites, store.directory == nil {
            logger.warning("conditional writes are not checked (--allow-unconditional-writes): if this bucket does not honour If-None-Match, a published manifest can be overwritten without a word",
                           metadata: ["snap.store": "\(store.location)"])
        }
        return store
    }

    /// Runs `open`: its failure is printed as `<code>: <store>: <message>` and exits 2 for a
    /// `config` error (a missing bucket, refused credentials), 1 otherwise.
    private static func reportingOpenErrors<T>(_ argument: String, _ open: () throws -> T) throws -> T {
        do { return try open() } catch let error as SnapError {
            // Messages from the bucket backend already start with the store's URL.
            let message = error.message.hasPrefix("s3://") ? error.message : "\(RedactedURL.text(argument)): \(error.message)"
            printError("\(error.code.rawValue): \(message)")
            throw ExitCode(error.code == .config ? 2 : 1)
        }
    }
}

extension StoreArgument {
    /// How buckets and queues are reached (`CloudSettings`), resolved from the layers of a
    /// command with `--config`: an unusable value is a usage error (exit 2) naming its source.
    static func cloud(_ layers: ConfigLayers) throws -> CloudSettings {
        do { return try CloudSettings.resolve(layers) } catch let error as SnapError { throw ValidationError(error.message) }
    }

    /// The same for commands without `--config` (`verify`, `ls`, `get`, `gc`): the
    /// environment and the file `SNAPTHUMB_CONFIG` names.
    static func cloud() throws -> CloudSettings {
        let environment = ProcessEnvironment.values
        do {
            return try cloud(ConfigLayers(flags: [:], environment: environment, file: ConfigLayers.loadFile(flag: nil, environment: environment)))
        } catch let error as SnapError { throw ValidationError(error.message) }
    }

    /// The store's create-only proof, before anything is claimed: a bucket that
    /// accepts an overwrite under the create-only header exits 2. One that cannot
    /// be reached now is not a verdict: the workers prove it before they publish.
    static func proveConditionalWrites(_ store: any StoreBackend, logger: Logger) throws {
        do { try store.proveConditionalWrites() } catch let error as SnapError where error.code.isTransient {
            logger.warning("cannot prove yet that the bucket refuses overwrites under the create-only header; each worker proves it before it publishes",
                           metadata: ["snap.store": "\(store.location)", "snap.error": "\(error.message)"])
        } catch let error as SnapError {
            let message = error.message.hasPrefix("s3://") ? error.message : "\(store.location): \(error.message)"
            printError("\(error.code.rawValue): \(message)")
            throw ExitCode(error.code == .config ? 2 : 1)
        }
    }
}

/// Store flags shared by the commands that write a store.
struct StoreOptions: ParsableArguments {
    @Flag(name: .long, help: "Write to a bucket even if it cannot prove that it refuses to overwrite an object under the create-only header (If-None-Match: *); a published manifest may then be overwritten without a word. A warning says so on every start. [env SNAPTHUMB_ALLOW_UNCONDITIONAL_WRITES; config store.allowUnconditionalWrites]")
    var allowUnconditionalWrites = false

    /// The flag, SNAPTHUMB_ALLOW_UNCONDITIONAL_WRITES, or store.allowUnconditionalWrites in the config file.
    func allowsUnconditionalWrites(_ layers: ConfigLayers) throws -> Bool {
        var layers = layers
        if allowUnconditionalWrites { layers.flags["allow-unconditional-writes"] = "true" }
        guard let (text, source) = layers.lookup("allow-unconditional-writes", file: [("store", "allowUnconditionalWrites")]) else { return false }
        do { return try parseSwitch(text, source: source) } catch let error as SnapError { throw ValidationError(error.message) }
    }
}
