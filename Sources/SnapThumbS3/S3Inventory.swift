import Foundation
import SnapThumbCore
import SnapThumbStore

/// `ls`, `get` and `gc` on a bucket: the directory inventory's operations with
/// listings (their LastModified is a blob's age) and plain GETs and DELETEs.
extension S3Store: StoreInventory {
    public func manifests(prefix: String) throws -> [StoreEntry] {
        let base = configuration.prefix + StoreLayout.manifests + "/"
        return try client.list(prefix: base + prefix).compactMap { object -> StoreEntry? in
            guard object.key.hasSuffix(".json") else { return nil }
            let key = String(object.key.dropFirst(base.count).dropLast(".json".count))
            guard !key.split(separator: "/").contains(where: { $0.hasPrefix(".") }) else { return nil }
            return StoreEntry(name: key, bytes: object.size, modified: object.lastModified, version: object.etag)
        }.sorted { $0.name < $1.name }
    }

    public func manifestBytes(_ key: String) throws -> [UInt8]? {
        try StoreKey.validate(key)
        return try client.get(manifestKey(key)).map { [UInt8]($0.body) }
    }

    public func blobs() throws -> [StoreEntry] {
        let base = configuration.prefix + StoreLayout.blobs + "/"
        return try client.list(prefix: base).compactMap { object -> StoreEntry? in
            let parts = object.key.dropFirst(base.count).split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2, BlobName.isValid(parts[1]), parts[0] == parts[1].prefix(2) else { return nil }
            // The create-only probe (S3Store.proveConditionalWrites) is the store's own, not an
            // output: no manifest names it, and gc must not delete it (it would only be PUT again).
            if parts[1] == S3Store.probeHex { return nil }
            return StoreEntry(name: String(parts[1]), bytes: object.size, modified: object.lastModified, version: object.etag)
        }.sorted { $0.name < $1.name }
    }

    public func blobBytes(_ hex: String) throws -> [UInt8]? {
        guard BlobName.isValid(hex[...]) else { return nil }
        return try client.get(blobKey(hex)).map { [UInt8]($0.body) }
    }

    /// Reads the object, then deletes it: a bucket cannot rename, so the bytes
    /// are what puts it back. (Its age was checked from the listing just before.)
    public func setAside(_ blob: StoreEntry, unlessWrittenAfter cutoff: Double) throws -> SetAsideBlob? {
        guard blob.modified <= cutoff, let (body, etag) = try client.get(blobKey(blob.name)) else { return nil }
        // Rewritten since the listing (another ETag): an upload is using it.
        let unquoted = { (tag: String) in tag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        if !blob.version.isEmpty, !etag.isEmpty, unquoted(etag) != unquoted(blob.version) { return nil }
        try client.delete(blobKey(blob.name))
        return SetAsideBlob(entry: blob, bytes: [UInt8](body))
    }

    public func putBack(_ blob: SetAsideBlob) throws {
        guard let bytes = blob.bytes else { return }
        _ = try client.put(blobKey(blob.entry.name), body: bytes, contentType: Self.mediaType(bytes))
    }

    public func discard(_ blob: SetAsideBlob) throws {}
}

extension S3XML {
    /// `2026-11-25T16:04:37.000Z` (a listing's LastModified) as seconds since 1970.
    static func seconds(iso8601 text: String) -> Double? {
        let parts = text.split(whereSeparator: { "-T:Z".contains($0) })
        guard parts.count == 6, let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
              let hour = Int(parts[3]), let minute = Int(parts[4]), let second = Double(parts[5]) else { return nil }
        // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Double(days * 86_400 + hour * 3600 + minute * 60) + second
    }
}
