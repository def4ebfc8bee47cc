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

    /// Moves `claim` to `failed/<key>` with its error record. False if the claim was gone.
    @discardableResult
    func quarantine(claim: String, key: String, error: SnapError, attempts: Int, worker: String) -> Bool {
        let record = ErrorRecord(key: key, code: error.code.rawValue, message: error.message,
                                   time: ISO8601DateFormatter().string(from: Date()), attempts: max(1, attempts), worker: worker)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        do {
            let json = try encoder.encode(record) + Data("\n".utf8)
            try FileOps.writeAtomically([UInt8](json), to: "\(layout.failed)/\(key).error.json")
        } catch {
            logger.error("cannot write the error record; the upload stays claimed", metadata: [
                "snap.key": "\(key)", "snap.error": "\(error)"])
            return false
        }
        guard rename(claim, "\(layout.failed)/\(key)") == 0 else {
            if errno != ENOENT {
                logger.error("cannot move a failed upload to failed/", metadata: ["snap.key": "\(key)", "snap.errno": "\(errno)"])
            }
            return false
        }
        FileOps.fsyncDirectory(layout.failed)
        return true
    }
}
