import Foundation
import SnapThumbCore
import SnapThumbStore

/// The one place a `snapthumb worker` command line is made, for every runner
/// user (backfill, bench, watch, consume).
public enum WorkerCommandLine {
    /// `worker` arguments that give a child process exactly these settings, store
    /// and sources. Each worker commits its own batches, and a syncfs flushes the
    /// whole filesystem: with `jobs` committers each gathers a batch for `jobs`
    /// times the usual delay, so that the run as a whole still syncs about once
    /// per delay rather than `jobs` times as often (workers never wait for their
    /// commits). `isolated`: a daemon's worker, which the OOM killer takes before
    /// its parent (watch, consume). `commitDelay`: the group commit's delay for one
    /// job, seconds (`batchGroupCommitDelay` for a batch run).
    public static func arguments(settings: Settings, store: any StoreBackend, reader: (any SourceReader)?, jobs: Int, isolated: Bool,
                                 commitDelay: Double = defaultGroupCommitDelay) throws -> [String] {
        let json = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        var arguments = ["worker", "--store", store.workerArgument, "--on-conflict", store.onConflict.rawValue, "--settings-json", json,
                         "--commit-delay-ms", String(commitDelay * 1000 * Double(max(1, jobs)))]
        if let sources = reader?.workerArgument { arguments += ["--sources", sources] }
        if isolated { arguments.append("--isolated") }
        return arguments
    }
}
