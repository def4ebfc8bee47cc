import Foundation
import SnapThumbCore
import SnapThumbStore
import SystemKit
import Synchronization

/// `snapthumb verify s3://BUCKET/PREFIX`: the directory verifier's checks on a
/// bucket. Lists the prefix, re-hashes every blob, validates every manifest
/// (schema, key, the blobs it names and their sizes). Objects are read several
/// at a time. Problems are `<s3 URL of the object>: <what is wrong>`; blobs no
/// manifest names are orphans.
extension S3Store {
    public func verify(schema: @escaping ManifestValidator) throws -> StoreVerification {
        try verify(schema: schema, parallel: 8)
    }

    public func verify(schema: @escaping ManifestValidator, parallel: Int) throws -> StoreVerification {
        let client = client
        let prefix = client.configuration.prefix
        let base = "s3://\(client.configuration.bucket)/"
        let blobsPrefix = StoreLayout.blobs + "/", manifestsPrefix = StoreLayout.manifests + "/"

        let objects = try client.list(prefix: prefix)
        var result = StoreVerification()
        var blobs: [S3Object] = []
        var manifests: [S3Object] = []
        for object in objects {
            let relative = object.key.dropFirst(prefix.count)
            if relative.hasPrefix(blobsPrefix) { blobs.append(object) } else if relative.hasPrefix(manifestsPrefix) { manifests.append(object) } else {
                result.problems.append("\(base)\(object.key): not part of a store (\(blobsPrefix) or \(manifestsPrefix))")
            }
        }
        if objects.isEmpty { result.problems.append("\(base)\(prefix): empty (is this a SnapThumb store?)") }

        // Blobs: the name is the SHA-256 of the content, under its first two hex digits.
        let blobProblems = concurrentMap(blobs, parallel: parallel) { object -> (String?, String, Int)? in
            let parts = object.key.dropFirst(prefix.count + blobsPrefix.count).split(separator: "/", omittingEmptySubsequences: false)
            let name = String(parts.last ?? "")
            guard parts.count == 2, name.count == 64, name.allSatisfy(\.isHexDigit), parts[0] == name.prefix(2) else {
                return ("\(base)\(object.key): not a blob name (\(StoreLayout.blobPattern))", name, -1)
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
            // Budgets are not checked here (the directory's verifier checks them): as before.
            return StoreVerification.check(
                manifest: data, path: path, expectedKey: String(object.key.dropFirst(prefix.count + manifestsPrefix.count).dropLast(".json".count)),
                schema: schema, blobSizes: blobSizes, budgets: false, describe: { "\($0)" },
                absent: { damaged.contains(String($0.digest.dropFirst("sha256:".count))) ? "a damaged" : "a missing" })
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
            .map { "\(base)\(prefix)\(StoreLayout.blobPath($0))" }
        return result
    }
}

/// `transform` over `items`, `parallel` at a time, results in order.
func concurrentMap<T, R: Sendable>(_ items: [T], parallel: Int, _ transform: @escaping @Sendable (T) -> R) -> [R] where T: Sendable {
    let results = ConcurrentResults<R>(count: items.count)
    let next = ConcurrentResults<Int>(count: 1)
    DispatchQueue.concurrentPerform(iterations: max(1, min(parallel, items.count))) { _ in
        while let i = next.claim(limit: items.count) { results.set(i, transform(items[i])) }
    }
    return results.values.map { $0! }
}

private final class ConcurrentResults<R: Sendable>: Sendable {
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
