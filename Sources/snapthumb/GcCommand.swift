import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore

/// `snapthumb gc STORE`: deletes orphan blobs, never manifests.
struct GcCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Delete blobs that no manifest names and that are older than --grace (never a manifest).",
        discussion: """
        Orphan blobs are left by uploads that failed before their manifest and by outputs a new recipe replaced; 'verify' names them and they are harmless. gc lists the blobs first and reads every manifest after, so a manifest published meanwhile keeps its blobs; a blob younger than --grace is kept, so an upload in flight (blobs written, manifest not yet) keeps its blobs: keep the grace well above the longest upload. An old orphan that an upload starts to use again is set aside first and put back if a manifest published meanwhile names it. A manifest that cannot be read stops gc before anything is deleted.

        Prints each blob it deletes on stdout ('deleted <blob>  <bytes> B  <age>'; --dry-run: 'would delete …', nothing is deleted), then a summary on stderr. The store verifies afterwards.

        Exit status: 0 done; 1 the store could not be read or changed (or a manifest is unreadable: nothing deleted); 2 a usage error (a store that does not exist, a bad --grace).
        """
    )

    @Argument(help: ArgumentHelp("Store directory or s3://BUCKET/PREFIX.", valueName: "store"), completion: .directory)
    var store: String

    @Option(name: .long, help: ArgumentHelp("Keep orphan blobs written less than this long ago: 0, 30m, 24h, 7d… [default: 24h]", valueName: "duration"))
    var grace = "24h"

    @Flag(name: .long, help: "Only print what would be deleted.")
    var dryRun = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    func validate() throws {
        try StoreArgument.validateExisting(store)
        guard parseDuration(grace) != nil else {
            throw ValidationError("--grace must be a duration such as 0, 30m, 24h or 7d (got '\(grace)')")
        }
    }

    func run() throws {
        try logging.bootstrap()
        let seconds = parseDuration(grace) ?? 86_400
        let inventory = try StoreArgument.openInventory(store)
        let now = Date().timeIntervalSince1970
        let collector = GarbageCollector(store: inventory, grace: seconds)
        let verb = dryRun ? "would delete" : "deleted"
        let report: GarbageCollector.Report
        do {
            report = try collector.run(dryRun: dryRun, now: now, onDelete: { blob in
                printOut("\(verb) \(inventory.blobLocation(blob.name))  \(blob.bytes) B  \(Self.age(now - blob.modified)) old")
            }, onKeep: { blob in
                Console.say("gc: kept \(inventory.blobLocation(blob.name)): a manifest published meanwhile names it", event: "kept",
                            metadata: ["snap.blob": "\(blob.name)"])
            })
        } catch let error as SnapError {
            Console.failure(store, code: error.code.rawValue, message: error.message)
            throw ExitCode(1)
        }
        let count = report.deleted.count
        Console.say("gc: \(report.blobs) blobs, \(report.manifests) manifests: \(count) orphan(s) \(dryRun ? "would be deleted" : "deleted") (\(report.deletedBytes) bytes); \(report.young) orphan(s) younger than \(formatDuration(seconds)) kept",
                    event: "gc finished", metadata: [
                        "snap.blobs": .number(report.blobs), "snap.manifests": .number(report.manifests),
                        "snap.deleted": .number(count), "snap.deleted_bytes": .number(report.deletedBytes),
                        "snap.young": .number(report.young), "snap.kept": .number(report.kept.count),
                        "snap.dry_run": .flag(dryRun)])
    }

    /// `3d`, `5h`, `12m`, `40s`: the largest whole unit.
    static func age(_ seconds: Double) -> String {
        let s = max(0, Int(seconds))
        if s >= 86_400 { return "\(s / 86_400)d" }
        if s >= 3600 { return "\(s / 3600)h" }
        if s >= 60 { return "\(s / 60)m" }
        return "\(s)s"
    }
}
