import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore

/// `snapthumb ls STORE [PREFIX]`: the keys a store holds, without knowing its layout.
struct LsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List a store's keys: each key, its square's bytes and when its manifest was written.",
        discussion: """
        One line per key, sorted: '<key><TAB><square100 bytes><TAB><manifest time, RFC 3339 UTC>'. With --json, one JSON object per line: the key, the manifest's time, the source (digest, bytes, media type, size) and every variant (digest, bytes, media type, size).

        A manifest that does not parse is reported on stderr ('<key>: <problem>') and makes the exit status 1; the others are still listed. A store that does not exist is a usage error (exit 2).
        """
    )

    @Argument(help: ArgumentHelp("Store directory or s3://BUCKET/PREFIX.", valueName: "store"), completion: .directory)
    var store: String

    @Argument(help: ArgumentHelp("Only keys that start with this (e.g. 2026/11/).", valueName: "prefix"))
    var prefix = ""

    @Flag(name: .long, help: "One JSON object per manifest, per line.")
    var json = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    func validate() throws { try StoreArgument.validateExisting(store) }

    /// One line of `ls --json`.
    struct Summary: Encodable {
        struct Variant: Encodable {
            var digest: String, bytes: Int, mediaType: String, width: Int, height: Int
        }
        struct Source: Encodable {
            var digest: String, bytes: Int, mediaType: String, width: Int, height: Int
        }
        var key: String
        var modified: String
        var source: Source
        var variants: [String: Variant]
        var recipe: String
    }

    func run() throws {
        try logging.bootstrap()
        let inventory = try StoreArgument.openInventory(store)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var problems = 0
        let entries: [StoreEntry]
        do { entries = try inventory.manifests(prefix: prefix) } catch let error as SnapError {
            Console.failure(store, code: error.code.rawValue, message: error.message)
            throw ExitCode(1)
        }
        for entry in entries {
            let manifest: Manifest
            do {
                guard let bytes = try inventory.manifestBytes(entry.name) else { continue } // removed since the listing
                manifest = try Manifest.decode(Data(bytes))
            } catch {
                problems += 1
                Console.failure(entry.name, code: (error as? SnapError)?.code.rawValue ?? "corrupt",
                                message: (error as? SnapError)?.message ?? "the manifest does not parse: \(describe(error))")
                continue
            }
            let time = SnapLogHandler.timestamp(Date(timeIntervalSince1970: entry.modified))
            if json {
                let summary = Summary(
                    key: manifest.key, modified: time,
                    source: .init(digest: manifest.source.digest, bytes: manifest.source.bytes, mediaType: manifest.source.mediaType,
                                  width: manifest.source.width, height: manifest.source.height),
                    variants: manifest.variants.mapValues { .init(digest: $0.digest, bytes: $0.bytes, mediaType: $0.mediaType, width: $0.width, height: $0.height) },
                    recipe: manifest.recipe.digest)
                printOut(String(decoding: try encoder.encode(summary), as: UTF8.self))
            } else {
                printOut("\(manifest.key)\t\(manifest.variants["square100"].map { "\($0.bytes)" } ?? "-")\t\(time)")
            }
        }
        if problems > 0 { throw ExitCode(1) }
    }
}
