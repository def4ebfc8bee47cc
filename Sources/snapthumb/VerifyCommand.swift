import ArgumentParser
import Foundation
import SnapThumbCore
import SnapThumbVerify

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a store: re-hash every blob, validate every manifest and the blobs it names.",
        discussion: "Prints each problem as '<path>: <problem>' and exits 1 if there is any. Stray temp files (left by a process that stopped mid-write) are warnings on stderr, 'warning: <path>: …', and do not change the exit status."
    )

    @Argument(help: ArgumentHelp("Store directory.", valueName: "store"))
    var store: String

    func run() throws {
        let report: StoreVerifier.Report
        do { report = try StoreVerifier.verify(root: store) } catch let error as SnapError {
            printError("\(store): \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        for problem in report.problems { printOut(problem) }
        for warning in report.warnings { printError("warning: \(warning)") }
        var verdict = report.isClean ? "ok" : "\(report.problems.count) problem(s)"
        if !report.warnings.isEmpty { verdict += ", \(report.warnings.count) warning(s)" }
        printError("verify: \(report.blobs) blobs, \(report.manifests) manifests: \(verdict)")
        if !report.isClean { throw ExitCode(1) }
    }
}
