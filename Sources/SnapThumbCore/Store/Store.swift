#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Upload keys: relative paths that stay inside the store.
public enum StoreKey {
    /// Throws `unsafe-name` for a key that is empty, absolute, has an empty,
    /// `.` or `..` segment, a control character, or a segment too long for a file name.
    public static func validate(_ key: String) throws {
        func refuse(_ why: String) -> SnapError {
            SnapError(.unsafeName, "key \"\(key.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined())\" \(why)")
        }
        guard !key.isEmpty else { throw refuse("is empty") }
        guard !key.hasPrefix("/") else { throw refuse("is an absolute path") }
        guard !key.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw refuse("contains a control character")
        }
        guard !key.contains("\\") else { throw refuse("contains a backslash") }
        for segment in key.split(separator: "/", omittingEmptySubsequences: false) {
            if segment.isEmpty { throw refuse("has an empty path segment") }
            if segment == "." || segment == ".." { throw refuse("has a '\(segment)' segment, which could escape the store") }
            if segment.utf8.count + ".json".utf8.count > 255 { throw refuse("has a segment longer than a file name may be") }
        }
    }
}

/// The content-addressed store:
///
///     <root>/blobs/sha256/<2 hex>/<64 hex>    immutable output bytes, stored once
///     <root>/manifests/<key>.json             one manifest per upload, published last
///
/// A reader never sees a manifest whose blobs are missing or partial: blobs
/// are written to a temp file in their final directory, fsynced, linked into
/// place without replacing anything, and their directory fsynced; the manifest
/// is then renamed into place atomically and its directory fsynced.
public struct Store: Sendable {
    public let root: String

    /// Opens (creating if needed) a store at `root`.
    public init(root: String) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        try Durable.makeDirectories(self.root + "/blobs/sha256")
        try Durable.makeDirectories(self.root + "/manifests")
    }

    public func manifestPath(for key: String) throws -> String {
        try StoreKey.validate(key)
        return "\(root)/manifests/\(key).json"
    }

    /// The manifest currently published for `key`, or nil (also nil when it does not parse).
    public func manifest(for key: String) throws -> Manifest? {
        guard let bytes = try Durable.readIfExists(try manifestPath(for: key)) else { return nil }
        return try? Manifest.decode(Data(bytes))
    }

    /// Stores the blobs, then publishes the manifest. On failure, the blobs this
    /// call created are removed again, so a failed upload leaves nothing behind.
    public func commit(_ upload: ProcessedUpload) throws {
        let manifestPath = try manifestPath(for: upload.manifest.key)
        var created: [String] = []
        do {
            for blob in upload.blobs where try put(blob) {
                created.append("\(root)/\(blob.path)")
            }
            try publish(upload.manifest.json(pretty: true) + Data("\n".utf8), at: manifestPath)
        } catch {
            for path in created { unlink(path) }
            throw error
        }
    }

    /// Writes one blob unless it is already there. Returns true if this call created it.
    @discardableResult
    public func put(_ blob: Blob) throws -> Bool {
        let path = "\(root)/\(blob.path)"
        let directory = (path as NSString).deletingLastPathComponent
        if access(path, F_OK) == 0 { return try verifyExisting(path, blob) }
        try Durable.makeDirectories(directory)
        let temp = Durable.tempPath(in: directory, for: blob.hex)
        try Durable.writeNew(temp, blob.bytes)
        defer { unlink(temp) }
        // link(2) never replaces an existing file, unlike rename(2).
        if link(temp, path) != 0 {
            if errno == EEXIST { return try verifyExisting(path, blob) }
            throw SnapError.io("cannot link blob into place at", path, errno: errno)
        }
        try Durable.fsyncDirectory(directory)
        return true
    }

    private func verifyExisting(_ path: String, _ blob: Blob) throws -> Bool {
        guard let existing = try Durable.readIfExists(path), existing == blob.bytes else {
            throw SnapError(.io, "blob \(path) exists but its bytes differ from \(blob.digest): the store is damaged (run snapthumb verify)")
        }
        return false
    }

    private func publish(_ json: Data, at path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        try Durable.makeDirectories(directory)
        let temp = Durable.tempPath(in: directory, for: (path as NSString).lastPathComponent)
        try Durable.writeNew(temp, [UInt8](json))
        guard rename(temp, path) == 0 else {
            let code = errno
            unlink(temp)
            throw SnapError.io("cannot publish manifest", path, errno: code)
        }
        try Durable.fsyncDirectory(directory)
    }
}
