import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbS3
import SystemKit
import Synchronization

/// `snapthumb verify s3://BUCKET/PREFIX`: the directory verifier's checks on a
/// bucket. Lists the prefix, re-hashes every blob, validates every manifest
/// (schema, key, the blobs it names and their sizes). Objects are read several
/// at a time. Problems are `<s3 URL of the object>: <what is wrong>`.
public enum S3Verifier {
    public struct Result: Sendable {
        public var blobs = 0
        public var manifests = 0
        /// One line per problem: `<url>: <what is wrong>` (the directory verifier's form).
        public var problems: [String] = []
        public var isClean: Bool { problems.isEmpty }
        /// Blobs no manifest names (left by an upload that failed before its
        /// manifest, or by a replaced recipe): harmless, reported as warnings.
        public var orphans: [String] = []
    }

    public static func verify(_ store: S3Store, parallel: Int = 8) throws -> Result {
        let client = store.client
        let prefix = client.configuration.prefix
        let base = "s3://\(client.configuration.bucket)/"
        let schema: JSONSchemaValidator
        do { schema = try ManifestSchema.validator() } catch { throw SnapError(.internal, "\(error)") }

        let objects = try client.list(prefix: prefix)
        var result = Result()
        var blobs: [S3Object] = []
        var manifests: [S3Object] = []
        for object in objects {
            let relative = object.key.dropFirst(prefix.count)
            if relative.hasPrefix("blobs/sha256/") { blobs.append(object) } else if relative.hasPrefix("manifests/") { manifests.append(object) } else {
                result.problems.append("\(base)\(object.key): not part of a store (blobs/sha256/ or manifests/)")
            }
        }
        if objects.isEmpty { result.problems.append("\(base)\(prefix): empty (is this a SnapThumb store?)") }

        // Blobs: the name is the SHA-256 of the content, under its first two hex digits.
        let blobProblems = concurrentMap(blobs, parallel: parallel) { object -> (String?, String, Int)? in
            let parts = object.key.dropFirst(prefix.count + "blobs/sha256/".count).split(separator: "/", omittingEmptySubsequences: false)
            let name = String(parts.last ?? "")
            guard parts.count == 2, name.count == 64, name.allSatisfy(\.isHexDigit), parts[0] == name.prefix(2) else {
                return ("\(base)\(object.key): not a blob name (blobs/sha256/<2 hex>/<64 hex>)", name, -1)
            }
            do {
                // A body that fails its hash is read again: only the same bytes twice are what is stored.
                switch try client.readChecked(object.key, check: { SHA256.hex($0) == name }) {
                case .absent: return ("\(base)\(object.key): listed but gone", name, -1)
                case .bad(let response): return ("\(base)\(object.key): content hashes to sha256:\(SHA256.hex(response.body)), not its name", name, -1)
                case .good(let response): return (nil, name, response.body.count)
                }
            } catch {
                return ("\(base)\(object.key): unreadable: \(error)", name, -1)
            }
        }
        var sizes: [String: Int] = [:]
        var damagedNames: Set<String> = []
        for case let (problem, name, size)? in blobProblems {
            result.blobs += 1
            if let problem { result.problems.append(problem); damagedNames.insert(name) } else { sizes[name] = size }
        }
        let blobSizes = sizes, damaged = damagedNames

        // Manifests: parse, validate against the schema, and point at good blobs.
        let manifestResults = concurrentMap(manifests, parallel: parallel) { object -> (problems: [String], blobs: [String]) in
            let path = "\(base)\(object.key)"
            guard object.key.hasSuffix(".json") else { return (["\(path): not a manifest (no .json suffix)"], []) }
            let data: Data
            do {
                // One that does not parse is read again: a transfer that went wrong is not a damaged manifest.
                switch try client.readChecked(object.key, check: { (try? Manifest.decode($0)) != nil }) {
                case .absent: return (["\(path): listed but gone"], [])
                case .good(let response), .bad(let response): data = response.body
                }
            } catch { return (["\(path): unreadable: \(error)"], []) }
            let schemaErrors = schema.validate(data)
            if !schemaErrors.isEmpty { return (schemaErrors.map { "\(path): schema: \($0)" }, []) }
            let manifest: Manifest
            do { manifest = try Manifest.decode(data) } catch { return (["\(path): does not parse as a manifest: \(error)"], []) }
            var problems: [String] = []
            let expectedKey = String(object.key.dropFirst(prefix.count + "manifests/".count).dropLast(".json".count))
            if manifest.key != expectedKey {
                problems.append("\(path): key \"\(manifest.key)\" does not match its path (expected \"\(expectedKey)\")")
            }
            var named: [String] = []
            for (name, variant) in manifest.variants.sorted(by: { $0.key < $1.key }) {
                let hex = String(variant.digest.dropFirst("sha256:".count))
                named.append(hex)
                if variant.path != "blobs/sha256/\(hex.prefix(2))/\(hex)" {
                    problems.append("\(path): variant \(name) path \(variant.path) does not match its digest")
                    continue
                }
                guard let size = blobSizes[hex] else {
                    problems.append("\(path): variant \(name) points at \(damaged.contains(hex) ? "a damaged" : "a missing") blob \(variant.path)")
                    continue
                }
                if size != variant.bytes { problems.append("\(path): variant \(name) says \(variant.bytes) bytes, blob has \(size)") }
            }
            return (problems, named)
        }
        var referenced: Set<String> = []
        for (object, outcome) in zip(manifests, manifestResults) {
            if object.key.hasSuffix(".json") { result.manifests += 1 }
            result.problems += outcome.problems
            referenced.formUnion(outcome.blobs)
        }
        // The create-only probe is SnapThumb's own blob, named by no manifest on purpose.
        referenced.insert(S3Store.probeHex)
        result.orphans = blobSizes.keys.filter { !referenced.contains($0) }.sorted()
            .map { "\(base)\(prefix)blobs/sha256/\($0.prefix(2))/\($0)" }
        return result
    }

    /// `transform` over `items`, `parallel` at a time, results in order.
    static func concurrentMap<T, R: Sendable>(_ items: [T], parallel: Int, _ transform: @escaping @Sendable (T) -> R) -> [R] where T: Sendable {
        let results = Results<R>(count: items.count)
        let next = Results<Int>(count: 1)
        DispatchQueue.concurrentPerform(iterations: max(1, min(parallel, items.count))) { _ in
            while let i = next.claim(limit: items.count) { results.set(i, transform(items[i])) }
        }
        return results.values.map { $0! }
    }

    private final class Results<R: Sendable>: Sendable {
        private struct State {
            var values: [R?]
            var cursor = 0
        }
        private let state: Mutex<State>
        init(count: Int) { state = Mutex(State(values: Array(repeating: nil, count: count))) }
        var values: [R?] { state.withLock { $0.values } }
        func set(_ i: Int, _ value: R) { state.withLock { $0.values[i] = value } }
        func claim(limit: Int) -> Int? {
            state.withLock { state in
                guard state.cursor < limit else { return nil }
                state.cursor += 1
                return state.cursor - 1
            }
        }
    }
}
