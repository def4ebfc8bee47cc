import ArgumentParser
import Foundation
import SnapThumbCore
import SnapThumbVerify

struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a store: re-hash every blob, validate every manifest and the blobs it names.",
        discussion: "Prints each problem as '<path>: <problem>' and exits 1 if there is any."
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
        let verdict = report.isClean ? "ok" : "\(report.problems.count) problem(s)"
        printError("verify: \(report.blobs) blobs, \(report.manifests) manifests: \(verdict)")
        if !report.isClean { throw ExitCode(1) }
    }
}
