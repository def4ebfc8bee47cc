import Foundation
import SnapThumbCore

/// `snapthumb gc`: removes blobs that no manifest names and that are older than
/// a grace period. Manifests are never touched.
///
/// Safe beside running uploads, which write their blobs first and their manifest
/// last:
/// 1. blobs are listed first, manifests read second, so a manifest published in
///    between is read and keeps its blobs;
/// 2. a blob written less than `grace` ago is kept: an upload in flight has
///    written its blobs but not yet its manifest;
/// 3. an old orphan that an upload reuses (the same output bytes again) is the
///    remaining case: blobs are set aside (renamed, or read and deleted) rather
///    than removed, manifests that appeared or changed meanwhile are read again,
///    and a blob one of them names is put back before it is discarded for good.
/// A manifest that cannot be read stops it before anything is removed: its blobs
/// would otherwise look unnamed.
public struct GarbageCollector: Sendable {
    public let store: any StoreInventory
    /// Seconds a blob is kept after it was written, named or not.
    public let grace: Double
    /// Blobs set aside before manifests are read again (bounds what a bucket holds in memory).
    public let round: Int

    public init(store: any StoreInventory, grace: Double, round: Int = 1000) {
        self.store = store
        self.grace = grace
        self.round = max(1, round)
    }

    public struct Report: Sendable {
        public var blobs = 0
        public var manifests = 0
        /// Unnamed and older than the grace: deleted (or, in a dry run, what would be).
        public var deleted: [StoreEntry] = []
        /// Unnamed but younger than the grace period.
        public var young = 0
        /// Set aside, then named by a manifest published meanwhile: put back.
        public var kept: [StoreEntry] = []
        public var deletedBytes: Int { deleted.reduce(0) { $0 + $1.bytes } }
    }

    /// Collects; `onDelete` is called for each blob once it is gone (or, with
    /// `dryRun`, for each that would go) and `onKeep` for one put back.
    public func run(dryRun: Bool, now: Double = Date().timeIntervalSince1970,
                    onDelete: (StoreEntry) -> Void = { _ in }, onKeep: (StoreEntry) -> Void = { _ in }) throws -> Report {
        var report = Report()
        let blobs = try store.blobs()
        report.blobs = blobs.count
        var (named, seen) = try readManifests(previous: [:])
        report.manifests = seen.count
        let cutoff = now - grace
        var candidates: [StoreEntry] = []
        for blob in blobs where !named.contains(blob.name) {
            if blob.modified <= cutoff { candidates.append(blob) } else { report.young += 1 }
        }
        if dryRun {
            for blob in candidates { onDelete(blob) }
            report.deleted = candidates
            return report
        }
        var start = 0
        while start < candidates.count {
            let batch = candidates[start ..< min(candidates.count, start + round)]
            start += batch.count
            var aside: [SetAsideBlob] = []
            do {
                for blob in batch { if let taken = try store.setAside(blob, unlessWrittenAfter: cutoff) { aside.append(taken) } }
                let (more, now) = try readManifests(previous: seen)
                named.formUnion(more)
                seen = now
            } catch {
                // Not knowing what the new manifests name, keep everything.
                for blob in aside { try? store.putBack(blob) }
                throw error
            }
            for blob in aside {
                if named.contains(blob.entry.name) {
                    try store.putBack(blob)
                    report.kept.append(blob.entry)
                    onKeep(blob.entry)
                } else {
                    try store.discard(blob)
                    report.deleted.append(blob.entry)
                    onDelete(blob.entry)
                }
            }
        }
        return report
    }

    /// The blobs named by manifests that are new or changed since `previous`
    /// (key → version), and every manifest's current version.
    func readManifests(previous: [String: String]) throws -> (named: Set<String>, versions: [String: String]) {
        var named: Set<String> = []
        var versions: [String: String] = [:]
        for entry in try store.manifests(prefix: "") {
            versions[entry.name] = entry.version
            if previous[entry.name] == entry.version { continue }
            guard let bytes = try store.manifestBytes(entry.name) else { continue } // deleted since the listing
            guard let digests = Self.digests(in: bytes) else {
                throw SnapError(.corrupt, "\(store.location): the manifest of \"\(entry.name)\" does not name its blobs as a manifest does; nothing was deleted (run verify, and fix or remove it)")
            }
            named.formUnion(digests)
        }
        return (named, versions)
    }

    /// The blob digests a manifest names (`variants.*.digest`), read loosely so
    /// that a newer manifest with more fields still counts; nil when it has none.
    static func digests(in bytes: [UInt8]) -> [String]? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let variants = object["variants"] as? [String: Any], !variants.isEmpty else { return nil }
        var found: [String] = []
        for case let variant as [String: Any] in variants.values {
            guard let digest = variant["digest"] as? String, let hex = BlobName.hex(ofDigest: digest) else { return nil }
            found.append(hex)
        }
        return found.count == variants.count ? found : nil
    }
}
