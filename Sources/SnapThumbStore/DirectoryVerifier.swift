import Foundation
import SnapThumbCore
import SystemKit

/// `snapthumb verify` on a directory: every file below `blobs/sha256` re-hashed (one
/// that is not named as a blob is a problem), every file below `manifests` checked,
/// SnapThumb's stray temp files reported as warnings.
extension DirectoryInventory {
    public func verify(schema: @escaping ManifestValidator) throws -> StoreVerification {
        var report = StoreVerification()
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SnapError(.io, "\(root) is not a directory")
        }
        for sub in [StoreLayout.blobs, StoreLayout.manifests] where !FileManager.default.fileExists(atPath: "\(root)/\(sub)") {
            report.problems.append("\(root)/\(sub): missing (is this a SnapThumb store?)")
        }

        for temp in TempFiles.find(under: root) {
            let state = TempFiles.isAlive(pid: temp.pid) ? "process \(temp.pid) is still running" : "its process \(temp.pid) is gone"
            report.warnings.append("\(temp.path): stray temp file (\(state); backfill and watch remove stale ones at start)")
        }

        // Blobs: the name is the SHA-256 of the content, under its first two hex digits.
        var blobSizes: [String: Int] = [:]
        if let blobs = try? FileWalker.regularFiles(under: "\(root)/\(StoreLayout.blobs)") {
            for entry in blobs.files {
                report.blobs += 1
                let parts = entry.relativePath.split(separator: "/")
                let name = String(parts.last ?? "")
                guard parts.count == 2, name.count == 64, name.allSatisfy(\.isHexDigit), parts[0] == name.prefix(2) else {
                    report.problems.append("\(entry.path): not a blob name (\(StoreLayout.blobPattern))")
                    continue
                }
                guard let bytes = try? Durable.readIfExists(entry.path) else {
                    report.problems.append("\(entry.path): unreadable")
                    continue
                }
                let actual = SHA256.hex(bytes)
                if actual != name {
                    report.problems.append("\(entry.path): content hashes to sha256:\(actual), not its name")
                } else {
                    blobSizes[name] = bytes.count
                }
            }
        }

        // Manifests: parse, validate against the schema, and point at good blobs.
        if let manifests = try? FileWalker.regularFiles(under: "\(root)/\(StoreLayout.manifests)") {
            for entry in manifests.files {
                guard entry.relativePath.hasSuffix(".json") else {
                    report.problems.append("\(entry.path): not a manifest (no .json suffix)")
                    continue
                }
                report.manifests += 1
                guard let bytes = try? Durable.readIfExists(entry.path) else {
                    report.problems.append("\(entry.path): unreadable")
                    continue
                }
                report.problems += StoreVerification.check(
                    manifest: Data(bytes), path: entry.path, expectedKey: String(entry.relativePath.dropLast(".json".count)),
                    schema: schema, blobSizes: blobSizes, budgets: true, describe: SnapThumbCore.describe,
                    absent: { FileManager.default.fileExists(atPath: "\(root)/\($0.path)") ? "a damaged" : "a missing" }).problems
            }
        }
        return report
    }
}
