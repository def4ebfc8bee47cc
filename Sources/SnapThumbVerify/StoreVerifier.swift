import Foundation
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// `snapthumb verify`: re-hashes every blob and checks every manifest.
public enum StoreVerifier {
    public struct Report: Sendable {
        public var blobs = 0
        public var manifests = 0
        /// One line per problem: `<path>: <what is wrong>`.
        public var problems: [String] = []
        /// Not errors: `<path>: <what>` for SnapThumb temp files left by a
        /// process that stopped mid-write (the next backfill or watch removes them).
        public var warnings: [String] = []
        public var isClean: Bool { problems.isEmpty }
    }

    public static func verify(root: String) throws -> Report {
        var report = Report()
        let schema: JSONSchemaValidator
        do { schema = try ManifestSchema.validator() } catch { throw SnapError(.internal, "\(error)") }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw SnapError(.io, "\(root) is not a directory")
        }
        for sub in ["blobs/sha256", "manifests"] where !FileManager.default.fileExists(atPath: "\(root)/\(sub)") {
            report.problems.append("\(root)/\(sub): missing (is this a SnapThumb store?)")
        }

        for temp in TempFiles.find(under: root) {
            let state = TempFiles.isAlive(pid: temp.pid) ? "process \(temp.pid) is still running" : "its process \(temp.pid) is gone"
            report.warnings.append("\(temp.path): stray temp file (\(state); backfill and watch remove stale ones at start)")
        }

        // Blobs: the name is the SHA-256 of the content, under its first two hex digits.
        var blobSizes: [String: Int] = [:]
        if let blobs = try? FileWalker.regularFiles(under: "\(root)/blobs/sha256") {
            for entry in blobs.files {
                report.blobs += 1
                let parts = entry.relativePath.split(separator: "/")
                let name = String(parts.last ?? "")
                guard parts.count == 2, name.count == 64, name.allSatisfy(\.isHexDigit), parts[0] == name.prefix(2) else {
                    report.problems.append("\(entry.path): not a blob name (blobs/sha256/<2 hex>/<64 hex>)")
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
        if let manifests = try? FileWalker.regularFiles(under: "\(root)/manifests") {
            for entry in manifests.files {
                guard entry.relativePath.hasSuffix(".json") else {
                    report.problems.append("\(entry.path): not a manifest (no .json suffix)")
                    continue
                }
                report.manifests += 1
                report.problems += checkManifest(entry, root: root, blobSizes: blobSizes, schema: schema)
            }
        }
        return report
    }

    private static func checkManifest(_ entry: FileWalker.Entry, root: String, blobSizes: [String: Int],
                                      schema: JSONSchemaValidator) -> [String] {
        guard let bytes = try? Durable.readIfExists(entry.path) else { return ["\(entry.path): unreadable"] }
        let data = Data(bytes)
        let schemaErrors = schema.validate(data)
        if !schemaErrors.isEmpty {
            return schemaErrors.map { "\(entry.path): schema: \($0)" }
        }
        let manifest: Manifest
        do { manifest = try Manifest.decode(data) } catch { return ["\(entry.path): does not parse as a manifest: \(describe(error))"] }
        var problems: [String] = []
        let expectedKey = String(entry.relativePath.dropLast(".json".count))
        if manifest.key != expectedKey {
            problems.append("\(entry.path): key \"\(manifest.key)\" does not match its path (expected \"\(expectedKey)\")")
        }
        for (name, variant) in manifest.variants.sorted(by: { $0.key < $1.key }) {
            let hex = String(variant.digest.dropFirst("sha256:".count))
            if variant.path != "blobs/sha256/\(hex.prefix(2))/\(hex)" {
                problems.append("\(entry.path): variant \(name) path \(variant.path) does not match its digest")
                continue
            }
            guard let size = blobSizes[hex] else {
                let exists = FileManager.default.fileExists(atPath: "\(root)/\(variant.path)")
                problems.append("\(entry.path): variant \(name) points at \(exists ? "a damaged" : "a missing") blob \(variant.path)")
                continue
            }
            if size != variant.bytes {
                problems.append("\(entry.path): variant \(name) says \(variant.bytes) bytes, blob has \(size)")
            }
            if let limit = variant.budget, !Budget(limit: limit, mode: variant.budgetMode).fits(size) {
                let measure = variant.budgetMode == .inline ? "\(Budget.base64Length(size)) base64 characters" : "\(size) bytes"
                problems.append("\(entry.path): variant \(name) is \(measure), over its budget of \(limit) (\(variant.budgetMode.rawValue) mode)")
            }
        }
        return problems
    }
}
