#if canImport(Glibc)
import Glibc
#endif
import Foundation
import VipsKit

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
/// is then linked into place (create-only, so two workers cannot both publish a
/// key) and its directory fsynced. When the key already has a manifest,
/// `KeyConflict.decide` says whether it is a repeat, a re-derive or a conflict.
public struct Store: Sendable {
    public let root: String
    /// What a publish does when the key has a manifest of other source bytes.
    public let onConflict: ConflictPolicy

    /// Opens (creating if needed) a store at `root`.
    public init(root: String, onConflict: ConflictPolicy = .refuse) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.onConflict = onConflict
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

    /// Stores the blobs, then publishes the manifest. On failure (a `conflict`
    /// too), the blobs this call created are removed again, so a failed upload
    /// leaves nothing behind.
    @discardableResult
    public func commit(_ upload: ProcessedUpload) throws -> PublishOutcome {
        let manifestPath = try manifestPath(for: upload.manifest.key)
        let created = try putAll(upload.blobs, sync: true)
        do {
            return try publish(upload.manifest, at: manifestPath, sync: true)
        } catch {
            for path in created { unlink(path) }
            throw error
        }
    }

    /// Moves a complete temp manifest to `path` without ever replacing a manifest
    /// that `KeyConflict.decide` says to keep: link(2) creates only; on EEXIST the
    /// existing manifest is read and compared. The temp file is gone afterwards.
    func place(_ temp: String, at path: String, _ manifest: Manifest) throws -> PublishOutcome {
        defer { unlink(temp) }
        if link(temp, path) == 0 { return .created }
        guard errno == EEXIST else { throw SnapError.io("cannot publish manifest", path, errno: errno) }
        let existing = (try? Durable.readIfExists(path)).flatMap { $0 }.flatMap { try? Manifest.decode(Data($0)) }
        switch KeyConflict.decide(existing: existing, new: manifest, policy: onConflict) {
        case .keep:
            return .repeated
        case .refuse(let error):
            throw error
        case .rederive:
            guard rename(temp, path) == 0 else { throw SnapError.io("cannot publish manifest", path, errno: errno) }
            return .rederived
        case .overwrite(let previous):
            guard rename(temp, path) == 0 else { throw SnapError.io("cannot publish manifest", path, errno: errno) }
            return previous.map { .replaced(previous: $0) } ?? .created
        }
    }

    /// An upload whose blobs and manifest are written (not yet synced), the
    /// manifest under a temporary name: what `publishBatch` takes.
    public struct Staged: Sendable {
        public let upload: ProcessedUpload
        let manifestPath: String
        let manifestTemp: String
    }

    /// Writes an upload's blobs, and its manifest under a temporary name, without
    /// syncing them, on the caller's thread: creating files is CPU work that
    /// belongs to the job, and the committer's thread then only syncs and renames.
    /// A blob is only ever linked into place complete; if a later one fails, the
    /// ones already there stay: another upload may already share them, and an
    /// unreferenced blob is harmless where a manifest without its blob is not.
    public func stage(_ upload: ProcessedUpload) throws -> Staged {
        let path = try manifestPath(for: upload.manifest.key)
        for blob in upload.blobs { try put(blob, sync: false) }
        let directory = Paths.parent(of: path)
        try Durable.makeDirectories(directory, sync: false)
        let temp = Durable.tempPath(in: directory, for: (path as NSString).lastPathComponent)
        try Durable.writeNew(temp, [UInt8](manifestFile(upload.manifest)), sync: false)
        return Staged(upload: upload, manifestPath: path, manifestTemp: temp)
    }

    /// Publishes staged uploads with two filesystem syncs in all instead of
    /// about eight fsyncs each: the filesystem is synced (every staged blob and
    /// manifest is then durable), every manifest is renamed into place, and it is
    /// synced again. A manifest is only ever visible once its blobs are durable.
    /// - Returns: one result per upload, in order; nil means committed.
    public func publishBatch(_ staged: [Staged]) -> [SnapError?] {
        if let failure = syncFilesystem() {
            for item in staged { discard(item) }
            return staged.map { _ in failure }
        }
        let results = renameIntoPlace(staged)
        if let failure = syncFilesystem() {
            // The renames may or may not be durable: report failure, leave the
            // files (each one is complete and points at durable blobs).
            return results.map { $0 ?? failure }
        }
        return results
    }

    /// Renames staged manifests into place. Call only after a sync that made
    /// their blobs and temp files durable; the renames themselves are durable
    /// after the next one. Returns one result per upload, in order.
    public func renameIntoPlace(_ staged: [Staged]) -> [SnapError?] {
        staged.map { item in
            do {
                _ = try place(item.manifestTemp, at: item.manifestPath, item.upload.manifest)
                return nil
            } catch {
                return error as? SnapError ?? SnapError(.io, "\(error)")
            }
        }
    }

    /// Removes a staged upload's temporary manifest (its blobs stay: see `stage`).
    public func discard(_ staged: Staged) {
        unlink(staged.manifestTemp)
    }

    /// Syncs the filesystem that holds the store (`syncfs`).
    public func syncFilesystem() -> SnapError? {
        let code = FileSystem.syncfs(root)
        return code == 0 ? nil : SnapError.io("cannot sync the store at", root, errno: code)
    }

    /// `stage` then `publishBatch`, for callers that have every upload at hand.
    public func commitBatch(_ uploads: [ProcessedUpload]) -> [SnapError?] {
        var staged: [Staged] = []
        var results = [SnapError?](repeating: nil, count: uploads.count)
        var positions: [Int] = []
        for (i, upload) in uploads.enumerated() {
            do {
                staged.append(try stage(upload))
                positions.append(i)
            } catch {
                results[i] = error as? SnapError ?? SnapError(.io, "\(error)")
            }
        }
        for (position, result) in zip(positions, publishBatch(staged)) { results[position] = result }
        return results
    }

    /// Writes blobs, removing the ones it created if any fails. Returns the created paths.
    private func putAll(_ blobs: [Blob], sync: Bool) throws -> [String] {
        var created: [String] = []
        do {
            for blob in blobs where try put(blob, sync: sync) {
                created.append("\(root)/\(blob.path)")
            }
        } catch {
            for path in created { unlink(path) }
            throw error
        }
        return created
    }

    /// Writes one blob unless it is already there. Returns true if this call created it.
    @discardableResult
    public func put(_ blob: Blob, sync: Bool = true) throws -> Bool {
        let path = "\(root)/\(blob.path)"
        let directory = Paths.parent(of: path)
        if access(path, F_OK) == 0 { return try verifyExisting(path, blob, sync: sync) }
        // Unsynced, a new fan-out directory is made durable by the same sync as
        // the blob (in a fresh store, each of up to 256 fsyncs waited for a device
        // flush and blocked the worker).
        try Durable.makeDirectories(directory, sync: sync)
        let temp = Durable.tempPath(in: directory, for: blob.hex)
        try Durable.writeNew(temp, blob.bytes, sync: sync)
        defer { unlink(temp) }
        // link(2) never replaces an existing file, unlike rename(2).
        if link(temp, path) != 0 {
            if errno == EEXIST { return try verifyExisting(path, blob, sync: sync) }
            throw SnapError.io("cannot link blob into place at", path, errno: errno)
        }
        if sync { try Durable.fsyncDirectory(directory) }
        return true
    }

    /// An existing blob with the same bytes is reused. One whose bytes do not
    /// hash to its name (a crash before a group sync can leave an empty file)
    /// is garbage and is replaced; one that is intact but different cannot exist.
    private func verifyExisting(_ path: String, _ blob: Blob, sync: Bool) throws -> Bool {
        let existing = try Durable.readIfExists(path)
        if existing == blob.bytes { return false }
        if let existing, SHA256.hex(existing) == blob.hex { return false }
        let directory = Paths.parent(of: path)
        let temp = Durable.tempPath(in: directory, for: blob.hex)
        try Durable.writeNew(temp, blob.bytes, sync: sync)
        guard rename(temp, path) == 0 else {
            let code = errno
            unlink(temp)
            throw SnapError.io("cannot replace the damaged blob", path, errno: code)
        }
        if sync { try Durable.fsyncDirectory(directory) }
        return false
    }

    /// The manifest file's bytes: pretty JSON and a final newline.
    private func manifestFile(_ manifest: Manifest) -> Data {
        manifest.json(pretty: true) + Data("\n".utf8)
    }

    private func publish(_ manifest: Manifest, at path: String, sync: Bool) throws -> PublishOutcome {
        let json = manifestFile(manifest)
        let directory = Paths.parent(of: path)
        try Durable.makeDirectories(directory)
        let temp = Durable.tempPath(in: directory, for: (path as NSString).lastPathComponent)
        try Durable.writeNew(temp, [UInt8](json), sync: sync)
        let outcome = try place(temp, at: path, manifest)
        if sync { try Durable.fsyncDirectory(directory) }
        return outcome
    }
}
