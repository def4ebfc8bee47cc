import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbQueue
import VipsKit
import SystemKit

/// The `snapthumb` command.
struct SnapThumb: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "snapthumb",
        abstract: "Tiny, correct, byte-budgeted thumbnails of photo snaps, in a content-addressed store.",
        discussion: """
        Every upload becomes three outputs in the store, described by one manifest:
          square100  100×100 JPEG: orientation applied, sRGB, no metadata, ≤ 4096 B
          pixel25    25×25 palette PNG (16 colours): the pixel-art grid
          pixel100   pixel25 ×4, nearest neighbour, same colours, ≤ 4096 B

        Store layout (manifest schema: docs/manifest.v1.schema.json):
          <store>/blobs/sha256/<2 hex>/<64 hex>   output bytes, stored once
          <store>/manifests/<key>.json            one manifest per upload

        Exit status: 0 all succeeded; 1 some input failed (verify: problems found); 2 usage error (before any work); 130/143 backfill or process interrupted by SIGINT/SIGTERM.

        Failures print as '<file>: <code>: <message>' on stderr. Codes: unsupported, too-large, corrupt, budget, unsafe-name, unreadable, io, conflict, timeout, poison, internal, store (a bucket store failed after retries: run again), superseded (consume: the object was replaced before it was read; its newer notification does the work).

        Shell completions: snapthumb --generate-completion-script bash (or zsh, fish); Scripts/install.sh installs them and this page as snapthumb(1).

        Examples:
          snapthumb process snap.jpg --store ./store
          snapthumb backfill ./uploads --store ./store --report failures.json
          snapthumb verify ./store
          snapthumb watch /srv/uploads --store ./store
          snapthumb ls ./store && snapthumb get ./store snap.jpg --output snap-thumb.jpg
          snapthumb gc ./store --dry-run
        """,
        version: SnapThumbVersion.current,
        subcommands: [ProcessCommand.self, BackfillCommand.self, VerifyCommand.self, WatchCommand.self, ConsumeCommand.self, BenchCommand.self,
                      ConfigCommand.self, VersionCommand.self, WorkerCommand.self, DecodeFloorCommand.self,
                      LsCommand.self, GetCommand.self, GcCommand.self, RedriveCommand.self]
    )
}

@main
enum Main {
    static func main() async {
        // Every command may process images for hours (watch, worker, backfill): keep RSS flat.
        POSIX.fixMallocMmapThreshold()
        // A bucket without an HMAC key is reached with Google credentials, when there are some (docs/google.md).
        GoogleBucketAuthorization.install()
        var parsed: (any ParsableCommand.Type)?
        let arguments = Array(CommandLine.arguments.dropFirst())
        // A worker process inherits its parent's environment: the parent has warned already.
        if arguments.first != "worker" { Console.defer(Suggestions.unknownEnvironment(ProcessEnvironment.values)) }
        do {
            if arguments.first == "worker", let worker = WorkerStart(arguments: arguments.dropFirst()) {
                parsed = WorkerCommand.self
                try worker.run()
            } else if arguments.first == "backfill", let backfill = try? BackfillCommand.parse(Array(arguments.dropFirst())) {
                // The subcommand parsed alone: about 3 ms less than the root's parse, which
                // reflects every subcommand and parses twice (once for completion requests).
                // Anything it refuses (--help, a typo) takes the root's parse below, whose
                // answer is the usual one.
                parsed = BackfillCommand.self
                try backfill.run()
            } else {
                var command = try SnapThumb.parseAsRoot()
                parsed = type(of: command)
                if var command = command as? any AsyncParsableCommand {
                    try await command.run()
                } else {
                    try command.run()
                }
            }
        } catch {
            let status = handle(error, command: parsed)
            if parsed == nil, status == 2, let hint = Suggestions.subcommand(for: arguments) { printError(hint) }
            Console.flushDeferred()
            POSIX.exitNow(status)
        }
        Console.flushDeferred()
        POSIX.exitNow(0)
    }

    /// Maps errors to the documented exit codes: usage errors are 2, not ArgumentParser's 64.
    /// A setting refused after parsing (environment, config file, value ranges) prints its sentence and
    /// where to look, not the root command's usage line.
    static func handle(_ error: any Error, command: (any ParsableCommand.Type)? = nil) -> Int32 {
        if let code = error as? ExitCode { return code.rawValue }
        if let error = error as? ValidationError, let command {
            let name = command.configuration.commandName.map { "snapthumb \($0)" } ?? "snapthumb"
            printError("Error: \(error.message)\nSee '\(name) --help' for what is allowed.")
            return 2
        }
        let code = SnapThumb.exitCode(for: error)
        let message = SnapThumb.fullMessage(for: error)
        if code == .success {
            printOut(message)
            return 0
        }
        printError(message)
        return code == .validationFailure ? 2 : code.rawValue
    }
}
