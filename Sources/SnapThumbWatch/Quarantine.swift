#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbCore

/// `failed/<name>.error.json`: why an upload was quarantined.
public struct ErrorRecord: Codable, Sendable, Equatable {
    /// The upload's name (its key in the store).
    public var key: String
    /// An `ErrorCode` raw value: `corrupt`, `timeout`, `poison`, …
    public var code: String
    /// A sentence saying what is wrong.
    public var message: String
    /// ISO 8601, UTC.
    public var time: String
    /// Attempts made, counting this one.
    public var attempts: Int
    /// The worker id that quarantined it.
    public var worker: String
}

/// Permanent failures: the error record is written atomically first, then the
/// upload is renamed into `failed/`, so a crash in between leaves the upload
/// claimed (and retried later), never lost.
struct Quarantine: Sendable {
    let layout: Layout
    let logger: Logger

    /// Moves `claim` to `failed/<key>` with its error record; a name already in
    /// `failed/` is never overwritten (the upload gets a distinct one, `a~2.jpg`
    /// with `a~2.jpg.error.json`). False if the claim was gone.
    @discardableResult
    func quarantine(claim: String, key: String, error: SnapError, attempts: Int, worker: String) -> Bool {
        let record = ErrorRecord(key: key, code: error.code.rawValue, message: error.message,
                                   time: ISO8601DateFormatter().string(from: Date()), attempts: max(1, attempts), worker: worker)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let failed = layout.failed
        func taken(_ name: String) -> Bool {
            FileOps.status("\(failed)/\(name)") != nil || FileOps.status("\(failed)/\(name).error.json") != nil
        }
        do {
            let json = try encoder.encode(record) + Data("\n".utf8)
            // The record first, under the name the upload will take: a crash in
            // between leaves the upload claimed (retried later), never lost.
            var name = key
            for n in 2...10_001 where taken(name) {
                let ext = (key as NSString).pathExtension
                name = ext.isEmpty ? "\(key)~\(n)" : "\(key.dropLast(ext.count + 1))~\(n).\(ext)"
            }
            try FileOps.writeAtomically([UInt8](json), to: "\(failed)/\(name).error.json")
            guard FileOps.status(claim) != nil else { unlink("\(failed)/\(name).error.json"); return false }
            let used = try FileOps.moveWithoutReplacing(claim, into: failed, name: name) { $0 != name && taken($0) }
            if used != name {
                // Another worker took the name meanwhile: the record follows the upload.
                try FileOps.writeAtomically([UInt8](json), to: "\(failed)/\(used).error.json")
            }
        } catch {
            logger.error("cannot quarantine the upload; it stays claimed", metadata: [
                "snap.key": "\(key)", "snap.error": "\(error)"])
            return false
        }
        FileOps.fsyncDirectory(failed)
        return true
    }
}
