#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SystemKit

/// SIGINT and SIGTERM for `backfill` and `process`: the first one sets
/// `interruption` (no new file is started; files in flight finish), a second one
/// ends the process at once. The exit status is then 128 + the signal number
/// (130 for SIGINT, 143 for SIGTERM), as shells and systemd expect.
enum Signals {
    /// Keeps the dispatch sources alive for the life of the process.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    static func catchInterrupts(into interruption: Interruption, _ what: String) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                // The message gets its own line, not the end of the progress bar's.
                ProgressDisplay.current.endLine()
                if interruption.signal != nil {
                    printError("\(what): second signal: stopping now")
                    POSIX.exitNow(128 + sig)
                }
                interruption.interrupt(by: sig)
                printError("\(what): interrupted (signal \(sig)): finishing the files in flight, starting no new ones (signal again to stop at once)")
            }
            source.resume()
            sources.append(source)
        }
    }

    /// Ignored in `worker` processes: their parent decides when they stop (it
    /// closes their input), and a terminal's Ctrl-C reaches the whole process group.
    static func ignoreInterrupts() {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
    }
}
