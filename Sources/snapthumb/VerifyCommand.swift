import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbVerify

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a store: re-hash every blob, validate every manifest and the blobs it names.",
        discussion: "Prints each problem as '<path>: <problem>' and exits 1 if there is any. Stray temp files (left by a process that stopped mid-write) are warnings on stderr, 'warning: <path>: …', and do not change the exit status. A bucket store (s3://BUCKET/PREFIX) is listed and every object read; blobs no manifest names are printed as warnings on stderr ('orphan: <url>') and are not problems. A store that does not exist, a missing bucket or refused credentials exit 2."
    )

    @Argument(help: ArgumentHelp("Store directory or s3://BUCKET/PREFIX.", valueName: "store"))
    var store: String

    func validate() throws { try StoreArgument.validateExisting(store) }

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    func run() throws {
        try logging.bootstrap()
        // Opened by scheme, as every command opens a store; a directory that is not a store is
        // verified all the same (what is missing is its problem).
        let inventory = try StoreArgument.openInventory(store, requireLayout: false)
        let result: StoreVerification
        do { result = try StoreVerifier.verify(inventory) } catch let error as SnapError {
            Console.failure(store, code: error.code.rawValue, message: error.message)
            throw ExitCode(1)
        }
        for orphan in result.orphans {
            Console.say("orphan: \(orphan) (no manifest names it; harmless)", event: "orphan", level: .warning, metadata: ["snap.object": "\(orphan)"])
        }
        let (problems, warnings, blobs, manifests) = (result.problems, result.warnings, result.blobs, result.manifests)
        for problem in problems { printOut(problem) }
        for warning in warnings { Console.say("warning: \(warning)", event: "warning", level: .warning, metadata: ["snap.warning": "\(warning)"]) }
        var verdict = problems.isEmpty ? "ok" : "\(problems.count) problem(s)"
        if !warnings.isEmpty { verdict += ", \(warnings.count) warning(s)" }
        Console.say("verify: \(blobs) blobs, \(manifests) manifests: \(verdict)", event: "verify finished", metadata: [
            "snap.blobs": .number(blobs), "snap.manifests": .number(manifests), "snap.problems": .number(problems.count), "snap.warnings": .number(warnings.count)])
        if !problems.isEmpty { throw ExitCode(1) }
    }
}
