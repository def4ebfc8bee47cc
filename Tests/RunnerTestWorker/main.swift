// The worker program of the runner's own tests: the runner's worker loop over a
// directory store, built from the runner's public API alone (the tests of
// SnapThumbRunner start it as ProcessPool's worker processes, so that they need
// not run `snapthumb worker`).
//
//   runner-test-worker --store DIR
import Foundation
import SnapThumbCore
import SnapThumbRunner
import SnapThumbStore
import SystemKit

let arguments = CommandLine.arguments
guard let at = arguments.firstIndex(of: "--store"), at + 1 < arguments.count else {
    FileHandle.standardError.write(Data("usage: runner-test-worker --store DIR\n".utf8))
    exit(2)
}
// As `snapthumb worker`: the parent decides when this ends (it closes the input), and
// this dies with it.
guard POSIX.dieWithParent() else { exit(1) }
signal(SIGINT, SIG_IGN)
signal(SIGTERM, SIG_IGN)
do {
    let store = try Store(root: arguments[at + 1])
    WorkerLoop(pipeline: try Pipeline(settings: Settings()), store: store).serve()
} catch {
    FileHandle.standardError.write(Data("runner-test-worker: \(error)\n".utf8))
    exit(1)
}
