#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

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
    let uploads: UploadDirectory
    let logger: Logger

    var layout: Layout { uploads.layout }

    /// The longest name `failed/` takes (`NAME_MAX`, 255 on Linux file systems).
    static let nameLimit = 255
    static let recordSuffix = ".error.json"

    /// Room kept for a `~<n>` that tells apart uploads of the same name.
    static let suffixRoom = 6

    /// The name an upload with `key` gets in `failed/`: the key itself when
    /// `<key>~<n>.error.json` fits the file system's name limit; otherwise the key cut
    /// short (at a character boundary) plus `~` and 16 hex digits of its SHA-256, so
    /// that the record always fits and different long keys stay apart. The record
    /// keeps the whole key.
    static func failedName(for key: String) -> String {
        if key.utf8.count + recordSuffix.utf8.count + suffixRoom <= nameLimit { return key }
        let tag = "~" + SHA256.hex(Array(key.utf8)).prefix(16)
        let room = nameLimit - recordSuffix.utf8.count - suffixRoom - tag.utf8.count
        return PathBytes.prefix(key, maxBytes: room) + tag
    }

    /// Moves the claim `name` (in the claim directory `claims`) to `failed/<key>` with
    /// its error record `failed/<key>.error.json` (a long key is shortened:
    /// `failedName(for:)`); a name already in `failed/` is never overwritten (the
    /// upload gets a distinct one, `a~2.jpg` with `a~2.jpg.error.json`). Everything is
    /// done relative to the folders held open, so a `failed/` swapped for a symlink
    /// receives nothing. False if the claim was gone.
    @discardableResult
    func quarantine(_ name: String, in claims: DirectoryHandle, key: String, error: SnapError, attempts: Int, worker: String) -> Bool {
        // No record for an upload that is not there (it would replace another's).
        guard claims.status(name) != nil else { return false }
        let record = ErrorRecord(key: key, code: error.code.rawValue, message: error.message,
                                   time: ISO8601DateFormatter().string(from: Date()), attempts: max(1, attempts), worker: worker)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let failed = uploads.failed
        func taken(_ name: String) -> Bool {
            failed.status(name) != nil || failed.status(name + Self.recordSuffix) != nil
        }
        func writeRecord(_ json: [UInt8], as name: String) throws {
            do { try failed.writeAtomically(name + Self.recordSuffix, json, tempName: Durable.tempName(for: name + Self.recordSuffix)) } catch {
                throw SnapError.io("cannot write", "\(layout.failed)/\(name)\(Self.recordSuffix)", errno: error.code)
            }
        }
        do {
            let json = [UInt8](try encoder.encode(record) + Data("\n".utf8))
            // The record first, under the name the upload will take: a crash in
            // between leaves the upload claimed (retried later), never lost.
            var target = Self.failedName(for: key)
            for n in 2...10_001 where taken(target) {
                let ext = PathBytes.pathExtension(key)
                let stem = String(decoding: key.utf8.dropLast(ext.isEmpty ? 0 : ext.utf8.count + 1), as: UTF8.self)
                target = Self.failedName(for: ext.isEmpty ? "\(key)~\(n)" : "\(stem)~\(n).\(ext)")
            }
            try writeRecord(json, as: target)
            guard claims.status(name) != nil else { failed.unlink(target + Self.recordSuffix); return false }
            let used = try FileOps.moveWithoutReplacing(name, from: claims, into: failed, name: target) { $0 != target && taken($0) }
            if used != target {
                // Another worker took the name meanwhile: the record follows the upload.
                try writeRecord(json, as: used)
            }
        } catch {
            logger.error("cannot quarantine the upload; it stays claimed", metadata: [
                "snap.key": "\(key)", "snap.error": "\(error)"])
            return false
        }
        failed.sync()
        return true
    }
}
