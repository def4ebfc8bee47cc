import Foundation
import SnapThumbCore
import SystemKit

/// Validates a manifest's bytes against the manifest schema: one line per error, none when
/// valid (`SnapThumbVerify` gives the validator of the schema it holds).
public typealias ManifestValidator = @Sendable (Data) -> [String]

/// What `verify` found in a store, whichever backend it is.
public struct StoreVerification: Sendable {
    public var blobs = 0
    public var manifests = 0
    /// One line per problem: `<path or URL>: <what is wrong>`.
    public var problems: [String] = []
    /// Not errors: `<path>: <what>` (a directory's stray temp files).
    public var warnings: [String] = []
    /// Blobs no manifest names (left by an upload that failed before its manifest, or by
    /// a replaced recipe), where the backend reports them: harmless, said as warnings.
    public var orphans: [String] = []
    public var isClean: Bool { problems.isEmpty }

    public init() {}

    /// The checks every backend makes of one manifest, after reading it: the schema, the key
    /// against its path, each variant's blob path against its digest, the blob there (its size
    /// from `blobSizes`, which holds the good blobs only) and, with `budgets`, the budget.
    /// - Parameters:
    ///   - path: how problems name the manifest.
    ///   - absent: "a damaged" or "a missing", for a named blob that is not among the good ones.
    ///   - describe: how a decoding error is written.
    /// - Returns: the problems, and the blobs the manifest names (for orphans).
    public static func check(manifest data: Data, path: String, expectedKey: String, schema: ManifestValidator,
                             blobSizes: [String: Int], budgets: Bool, describe: (any Error) -> String,
                             absent: (Variant) -> String) -> (problems: [String], blobs: [String]) {
        let schemaErrors = schema(data)
        if !schemaErrors.isEmpty { return (schemaErrors.map { "\(path): schema: \($0)" }, []) }
        let manifest: Manifest
        do { manifest = try Manifest.decode(data) } catch { return (["\(path): does not parse as a manifest: \(describe(error))"], []) }
        var problems: [String] = []
        if manifest.key != expectedKey {
            problems.append("\(path): key \"\(manifest.key)\" does not match its path (expected \"\(expectedKey)\")")
        }
        var named: [String] = []
        for (name, variant) in manifest.variants.sorted(by: { $0.key < $1.key }) {
            let hex = String(variant.digest.dropFirst("sha256:".count))
            named.append(hex)
            if variant.path != StoreLayout.blobPath(hex) {
                problems.append("\(path): variant \(name) path \(variant.path) does not match its digest")
                continue
            }
            guard let size = blobSizes[hex] else {
                problems.append("\(path): variant \(name) points at \(absent(variant)) blob \(variant.path)")
                continue
            }
            if size != variant.bytes {
                problems.append("\(path): variant \(name) says \(variant.bytes) bytes, blob has \(size)")
            }
            if budgets, let limit = variant.budget, !Budget(limit: limit, mode: variant.budgetMode).fits(size) {
                let measure = variant.budgetMode == .inline ? "\(Budget.base64Length(size)) base64 characters" : "\(size) bytes"
                problems.append("\(path): variant \(name) is \(measure), over its budget of \(limit) (\(variant.budgetMode.rawValue) mode)")
            }
        }
        return (problems, named)
    }
}

extension StoreInventory {
    /// `verify` from the inventory alone, for a backend that has no verifier of its own:
    /// every blob re-hashed, every manifest checked (`StoreVerification.check`, budgets
    /// included), blobs no manifest names reported as orphans (`blobLocation`).
    public func verify(schema: @escaping ManifestValidator) throws -> StoreVerification {
        var result = StoreVerification()
        var sizes: [String: Int] = [:]
        var damaged: Set<String> = []
        for blob in try blobs() {
            result.blobs += 1
            let path = blobLocation(blob.name)
            guard let bytes = try blobBytes(blob.name) else { result.problems.append("\(path): listed but gone"); continue }
            let actual = SHA256.hex(bytes)
            if actual == blob.name { sizes[blob.name] = bytes.count } else {
                damaged.insert(blob.name)
                result.problems.append("\(path): content hashes to sha256:\(actual), not its name")
            }
        }
        var referenced: Set<String> = []
        let base = location.hasSuffix("/") ? String(location.dropLast()) : location
        for entry in try manifests(prefix: "") {
            result.manifests += 1
            let path = "\(base)/\(StoreLayout.manifestPath(entry.name))"
            guard let bytes = try manifestBytes(entry.name) else { result.problems.append("\(path): listed but gone"); continue }
            let (problems, named) = StoreVerification.check(
                manifest: Data(bytes), path: path, expectedKey: entry.name, schema: schema, blobSizes: sizes, budgets: true,
                describe: SnapThumbCore.describe, absent: { damaged.contains(String($0.digest.dropFirst("sha256:".count))) ? "a damaged" : "a missing" })
            result.problems += problems
            referenced.formUnion(named)
        }
        result.orphans = sizes.keys.filter { !referenced.contains($0) }.sorted().map(blobLocation)
        return result
    }
}
