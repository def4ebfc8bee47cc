import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// `snapthumb get STORE KEY`: one variant's bytes (or the manifest), checked against its digest.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write a key's thumbnail (or its manifest) to stdout or a file, checked against its digest.",
        discussion: """
        Reads the key's manifest, then the blob of --variant (default square100), and checks that its bytes hash to the manifest's digest and have its size before writing anything: a damaged blob is reported (exit 1) and never written. --output writes the file atomically; without it the bytes go to stdout.

        Failure codes: unreadable (no such key, or no such variant of it), corrupt (a blob missing or damaged, a manifest that does not parse). Exit status: 0 written; 1 no such key or variant, or a damaged blob; 2 a usage error (a store that does not exist, a key that could escape the store).
        """
    )

    static let variants = ["square100", "pixel25", "pixel100", "square100-avif", "square100-heic"]

    @Argument(help: ArgumentHelp("Store directory or s3://BUCKET/PREFIX.", valueName: "store"), completion: .directory)
    var store: String

    @Argument(help: ArgumentHelp("The upload's key (what 'snapthumb ls' prints).", valueName: "key"))
    var key: String

    @Option(name: .long, help: ArgumentHelp("Which output: square100, pixel25, pixel100, or a --modern one (square100-avif, square100-heic). [default: square100]", valueName: "name"),
            completion: .list(GetCommand.variants))
    var variant: String?

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("Write to this file instead of stdout.", valueName: "file"), completion: .file())
    var output: String?

    @Flag(name: .long, help: "Print the manifest (JSON) instead of a variant.")
    var manifest = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    func validate() throws {
        try StoreArgument.validateExisting(store)
        do { try StoreKey.validate(key) } catch let error as SnapError { throw ValidationError("<key>: \(error.message)") }
        if manifest, variant != nil { throw ValidationError("--manifest prints the whole manifest: leave out --variant") }
        if !manifest, output == nil || output == "-", isatty(STDOUT_FILENO) == 1 {
            throw ValidationError("stdout is a terminal, and a thumbnail is binary: use --output FILE or a pipe (snapthumb get … > thumb.jpg)")
        }
    }

    func run() throws {
        try logging.bootstrap()
        let inventory = try StoreArgument.openInventory(store)
        do {
            guard let manifestBytes = try inventory.manifestBytes(key) else {
                // Permanent, not `io` (a transient write failure): asking again finds nothing either.
                throw SnapError(.unreadable, "no manifest for key \"\(key)\" in \(inventory.location) (snapthumb ls lists the keys)")
            }
            if manifest { return try write(manifestBytes) }
            let parsed: Manifest
            do { parsed = try Manifest.decode(Data(manifestBytes)) } catch {
                throw SnapError(.corrupt, "the manifest of \"\(key)\" does not parse: \(describe(error)) (run snapthumb verify)")
            }
            let name = variant ?? "square100"
            guard let entry = parsed.variants[name] else {
                throw SnapError(.unreadable, "\"\(key)\" has no variant \(name) (it has \(parsed.variants.keys.sorted().joined(separator: ", ")))")
            }
            guard let hex = BlobName.hex(ofDigest: entry.digest) else {
                throw SnapError(.corrupt, "variant \(name) of \"\(key)\" has no sha256 digest (run snapthumb verify)")
            }
            guard let bytes = try inventory.blobBytes(hex) else {
                // A manifest naming a blob that is not there: the store is damaged, as verify says.
                throw SnapError(.corrupt, "the blob of variant \(name) of \"\(key)\" is missing: \(inventory.blobLocation(hex)) (run snapthumb verify)")
            }
            let actual = SHA256.hex(bytes)
            guard actual == hex, bytes.count == entry.bytes else {
                throw SnapError(.corrupt, "the blob \(inventory.blobLocation(hex)) is damaged: \(bytes.count) bytes hashing to sha256:\(actual), the manifest says \(entry.bytes) bytes, \(entry.digest); nothing written (run snapthumb verify)")
            }
            try write(bytes)
        } catch let error as SnapError {
            Console.failure(key, code: error.code.rawValue, message: error.message)
            throw ExitCode(1)
        }
    }

    private func write(_ bytes: [UInt8]) throws {
        guard let output, output != "-" else {
            FileHandle.standardOutput.write(Data(bytes))
            return
        }
        try FileOps.writeAtomically(bytes, to: output)
    }
}
