#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SystemKit

/// One object of a store, as a listing shows it.
public struct StoreEntry: Sendable, Equatable {
    /// A manifest's key, or a blob's 64 hex digits.
    public var name: String
    /// Its size in bytes.
    public var bytes: Int
    /// When it was last written, seconds since 1970 (a file's mtime, an object's Last-Modified).
    public var modified: Double
    /// Changes whenever the object is rewritten (mtime and size, or the ETag).
    public var version: String

    public init(name: String, bytes: Int, modified: Double, version: String) {
        self.name = name
        self.bytes = bytes
        self.modified = modified
        self.version = version
    }
}

/// A blob `gc` has taken out of the store but can still put back (a renamed
/// file, or the bytes of a deleted object), until it is discarded.
public struct SetAsideBlob: Sendable {
    public let entry: StoreEntry
    /// The temp name it was renamed to in its own directory (a directory store), if any.
    public let path: String?
    /// Its bytes (a bucket, where a deleted object cannot be renamed back).
    public let bytes: [UInt8]?

    public init(entry: StoreEntry, path: String? = nil, bytes: [UInt8]? = nil) {
        self.entry = entry
        self.path = path
        self.bytes = bytes
    }
}

/// What `ls`, `get` and `gc` need of a store: listings with times, reads, and
/// taking blobs out. A directory (`DirectoryInventory`) and a bucket both have one.
/// Nothing here creates a store: a missing one is the caller's usage error.
public protocol StoreInventory: Sendable {
    /// A directory path or `s3://BUCKET/PREFIX`, for messages.
    var location: String { get }
    /// Manifests whose key starts with `prefix`, sorted by key (`name` is the key).
    func manifests(prefix: String) throws -> [StoreEntry]
    /// A manifest's bytes, or nil when there is none.
    func manifestBytes(_ key: String) throws -> [UInt8]?
    /// Every blob (`name` is its hex digest); names that are not 64 hex digits are left out.
    func blobs() throws -> [StoreEntry]
    /// A blob's bytes, or nil when there is none.
    func blobBytes(_ hex: String) throws -> [UInt8]?
    /// Takes a blob out of the store, unless it was written after `cutoff`
    /// (then, or when it is already gone, nil).
    func setAside(_ blob: StoreEntry, unlessWrittenAfter cutoff: Double) throws -> SetAsideBlob?
    /// Puts a set-aside blob back where it was (a blob written there meanwhile stays).
    func putBack(_ blob: SetAsideBlob) throws
    /// Forgets a set-aside blob for good.
    func discard(_ blob: SetAsideBlob) throws
    /// Re-hashes every blob and checks every manifest against `schema` and the blobs it
    /// names (`snapthumb verify`). A backend without a verifier of its own gets the one
    /// built from the operations above (`StoreInventory.verify` in StoreVerification.swift).
    func verify(schema: @escaping ManifestValidator) throws -> StoreVerification
}

extension StoreInventory {
    /// `<location>/blobs/sha256/<2 hex>/<64 hex>`, for messages.
    public func blobLocation(_ hex: String) -> String {
        "\(location.hasSuffix("/") ? String(location.dropLast()) : location)/\(StoreLayout.blobPath(hex))"
    }
}

/// A directory store read without changing it (only `gc` removes blobs). Like `Store`, it never
/// follows a symbolic link below the root: files are opened through `StoreDirectory`, and the
/// walk neither enters a linked directory nor lists a linked file.
public struct DirectoryInventory: StoreInventory {
    public let root: String
    public var location: String { root }

    /// Refuses (`config`) a path that is not a directory, or a directory that is not a store.
    /// - Parameter requireLayout: false opens it unchecked, for `verify`, which reports
    ///   what is missing as its problems.
    public init(root: String, requireLayout: Bool = true) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        guard requireLayout else { return }
        func isDirectory(_ path: String) -> Bool {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
        }
        guard isDirectory(self.root) else { throw SnapError(.config, "\(root) is not a directory") }
        for sub in [PathBytes.segments(StoreLayout.blobs), [StoreLayout.manifests]] {
            guard isDirectory("\(self.root)/\(sub.joined(separator: "/"))") else {
                throw SnapError(.config, "\(root) is not a SnapThumb store (no \(sub.joined(separator: "/"))/ in it)")
            }
            _ = try StoreDirectory.open(root: self.root, sub, create: false) // a symlink there is unsafe-name
        }
    }

    public func manifests(prefix: String) throws -> [StoreEntry] {
        var found: [StoreEntry] = []
        try walk("\(root)/\(StoreLayout.manifests)", relative: "") { relative, status in
            guard relative.hasSuffix(".json") else { return }
            let key = String(relative.dropLast(".json".count))
            guard key.hasPrefix(prefix) else { return }
            found.append(StoreEntry(name: key, bytes: status.size, modified: status.mtime, version: "\(status.mtime)/\(status.size)"))
        }
        return found.sorted { $0.name < $1.name }
    }

    public func manifestBytes(_ key: String) throws -> [UInt8]? {
        try StoreKey.validate(key)
        guard let (directory, name) = try StoreDirectory.existingParent(root: root, of: StoreLayout.manifestPath(key)) else { return nil }
        return try directory.readIfExists(name)
    }

    public func blobs() throws -> [StoreEntry] {
        var found: [StoreEntry] = []
        try walk("\(root)/\(StoreLayout.blobs)", relative: "") { relative, status in
            let parts = relative.split(separator: "/")
            guard parts.count == 2, let name = parts.last, BlobName.isValid(name), parts[0] == name.prefix(2) else { return }
            found.append(StoreEntry(name: String(name), bytes: status.size, modified: status.mtime, version: "\(status.mtime)/\(status.size)"))
        }
        return found.sorted { $0.name < $1.name }
    }

    public func blobBytes(_ hex: String) throws -> [UInt8]? {
        guard BlobName.isValid(hex[...]), let (directory, name) = try StoreDirectory.existingParent(root: root, of: relativePath(of: hex)) else {
            return nil
        }
        return try directory.readIfExists(name)
    }

    /// Renames the blob to one of SnapThumb's temp names in its own directory (an
    /// upload that needs it meanwhile writes it anew), after checking that it was
    /// not written or reused since the listing.
    public func setAside(_ blob: StoreEntry, unlessWrittenAfter cutoff: Double) throws -> SetAsideBlob? {
        guard let status = FileOps.status("\(root)/\(relativePath(of: blob.name))"), status.isRegular, status.mtime <= cutoff,
              let (directory, name) = try StoreDirectory.existingParent(root: root, of: relativePath(of: blob.name)) else { return nil }
        let temp = directory.tempName(for: "gc-" + name)
        let code = directory.rename(name, temp)
        if code == ENOENT { return nil }
        guard code == 0 else { throw SnapError.io("cannot set aside", directory.display(name), errno: code) }
        return SetAsideBlob(entry: blob, path: temp)
    }

    public func putBack(_ blob: SetAsideBlob) throws {
        guard let temp = blob.path else { return }
        let (directory, name) = try StoreDirectory.openParent(root: root, of: relativePath(of: blob.entry.name), create: true)
        // link(2): a copy written there meanwhile (the same bytes) stays.
        let code = directory.link(temp, name)
        if code != 0 && code != EEXIST { throw SnapError.io("cannot put back", directory.display(name), errno: code) }
        directory.unlink(temp)
        try directory.sync()
    }

    public func discard(_ blob: SetAsideBlob) throws {
        guard let temp = blob.path,
              let (directory, _) = try StoreDirectory.existingParent(root: root, of: relativePath(of: blob.entry.name)) else { return }
        directory.unlink(temp)
    }

    func relativePath(of hex: String) -> String { StoreLayout.blobPath(hex) }

    /// Regular files under `directory`, depth first, without following symlinks or
    /// entering dot-directories; dot-files (temp files) are left out.
    private func walk(_ directory: String, relative: String, _ visit: (String, FileOps.Status) throws -> Void) throws {
        var names: [String] = []
        try FileOps.forEachName(in: directory) { names.append($0); return true }
        for name in names.sorted() where !name.hasPrefix(".") {
            let path = "\(directory)/\(name)"
            let rel = relative.isEmpty ? name : "\(relative)/\(name)"
            guard let status = FileOps.status(path) else { continue }
            if status.isDirectory { try walk(path, relative: rel, visit) } else if status.isRegular { try visit(rel, status) }
        }
    }
}

/// Blob names: 64 lower-case hex digits.
public enum BlobName {
    public static func isValid(_ name: Substring) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The hex digits of `sha256:<hex>`, or nil.
    public static func hex(ofDigest digest: String) -> String? {
        guard digest.hasPrefix("sha256:") else { return nil }
        let hex = digest.dropFirst("sha256:".count)
        return isValid(hex) ? String(hex) : nil
    }
}
