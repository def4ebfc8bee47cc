#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SystemKit

/// The content-addressed store:
///
///     <root>/blobs/sha256/<2 hex>/<64 hex>    immutable output bytes, stored once
///     <root>/manifests/<key>.json             one manifest per upload, published last
///
/// A reader never sees a manifest whose blobs are missing or partial: blobs
/// are written to a temp file in their final directory and moved into place
/// without replacing anything; the manifest, written to a temp file beside the
/// upload's first blob, is moved into place only once they are durable
/// (create-only, so two workers cannot both publish a key), then made durable
/// itself. When the key already has a manifest, `KeyConflict.decide` says whether
/// it is a repeat, a re-derive or a conflict.
public struct Store: Sendable {
    public let root: String
    /// What a publish does when the key has a manifest of other source bytes.
    public let onConflict: ConflictPolicy
    /// `blobs/sha256` and `manifests`, kept open between uploads (see `OpenDirectories`).
    private let directories = OpenDirectories()

    /// How many new fan-out directories were made beside one the allocator placed (`OpenDirectories.makeBeside`).
    var fanOutMadeBeside: Int { directories.madeBeside }

    /// `StoreLayout.blobs` as path components.
    private static let blobComponents = PathBytes.segments(StoreLayout.blobs)

    /// Opens (creating if needed) a store at `root`.
    public init(root: String, onConflict: ConflictPolicy = .refuse) throws {
        self.root = root.utf8.count > 1 && root.utf8.last == UInt8(ascii: "/") ? String(decoding: root.utf8.dropLast(), as: UTF8.self) : root
        self.onConflict = onConflict
        try Durable.makeDirectories(self.root)
        // Below the root, nothing is followed: a planted symlink is refused here already.
        let blobs = try directories.open(root: self.root, Self.blobComponents[...], create: true, sync: true, missingIsNil: false)
        // The 256 fan-out directories hold unrelated blobs: on ext4, spread them (and so the
        // blobs' inodes) over the block groups. Packed into one group, each new file's inode
        // search walked past every inode freed there in the last minutes on a filesystem
        // without a journal: up to a fifth of a backfill's CPU after a store was deleted
        // (docs/performance.md). Where the filesystem has no such flag, nothing changes.
        // That search costs a scan of every group per directory: most are made beside one it
        // placed instead (`OpenDirectories.makeBeside`).
        if let blobs { directories.spreadsChildren = FileSystem.markTopDirectory(fd: blobs.fd) }
        // The manifests, one directory of files, are placed by the allocator too rather than
        // beside the root, where an earlier store's deleted manifests would be walked past.
        if let blobs, directories.spreadsChildren { try Self.placeManifests(root: self.root, madeIn: blobs) }
        _ = try directories.open(root: self.root, [StoreLayout.manifests], create: true, sync: true, missingIsNil: false)
    }

    /// Makes a missing `manifests` by way of `blobs/sha256` (whose top-directory flag has ext4
    /// place each new subdirectory in the emptiest block group), moved to the root
    /// (`StoreDirectory.makeDirectory(_:movedInto:…)`). Whatever fails leaves the plain
    /// `mkdir` that follows to make it; another process that made it first wins.
    private static func placeManifests(root: String, madeIn blobs: StoreDirectory) throws {
        let top = Glibc.open(root.isEmpty ? "." : root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard top >= 0 else { return }
        defer { Glibc.close(top) }
        var st = stat()
        guard fstatat(top, StoreLayout.manifests, &st, AT_SYMLINK_NOFOLLOW) != 0, errno == ENOENT else { return }
        _ = try blobs.makeDirectory(StoreLayout.manifests, movedInto: top, shownAs: root, sync: true)
    }

    /// The directory that holds `relativePath` and the file's name: `blobs/sha256` or
    /// `manifests` from `directories`, the rest opened below it (as `StoreDirectory.openParent`
    /// and `existingParent` do from the root). Nil when a directory is missing and not `create`.
    private func parent(of relativePath: String, create: Bool, sync: Bool) throws -> (StoreDirectory, String)? {
        var components = PathBytes.segments(relativePath)
        let name = components.removeLast()
        let kept = components.starts(with: Self.blobComponents) ? Self.blobComponents.count : components.first == StoreLayout.manifests ? 1 : 0
        let directory: StoreDirectory?
        if kept == 0 {
            directory = try StoreDirectory.open(root: root, components, create: create, sync: sync, missingIsNil: !create)
        } else {
            directory = try directories.open(root: root, components[..<kept], create: create, sync: sync, missingIsNil: !create)?
                .open(components[kept...], create: create, sync: sync, missingIsNil: !create)
        }
        return directory.map { ($0, name) }
    }

    /// `blobs/sha256`, created if missing, from `directories` while it is still the directory the path leads to.
    private func blobsDirectory(sync: Bool) throws -> StoreDirectory {
        guard let blobs = try directories.open(root: root, Self.blobComponents[...], create: true, sync: sync, missingIsNil: false) else {
            throw SnapError(.internal, "unreachable: a missing directory below \(root) was not reported")
        }
        return blobs
    }

    /// The fan-out directory (`<2 hex>`) that holds `blob`, below `blobs` (`blobsDirectory`), created if
    /// missing: kept open while it is still the directory of that name there (`OpenDirectories.child`).
    private func blobDirectory(of blob: Blob, in blobs: StoreDirectory, sync: Bool) throws -> StoreDirectory {
        try directories.child(String(blob.hex.prefix(2)), of: blobs, sync: sync)
    }

    public func manifestPath(for key: String) throws -> String {
        try StoreKey.validate(key)
        return "\(root)/\(StoreLayout.manifestPath(key))"
    }

    /// The directory that holds `key`'s manifest, opened below the root without
    /// following a symlink, and the manifest's file name in it.
    private func manifestDirectory(for key: String, create: Bool, sync: Bool = true) throws -> (StoreDirectory, String) {
        try StoreKey.validate(key)
        guard let found = try parent(of: StoreLayout.manifestPath(key), create: create, sync: sync) else {
            throw SnapError.io("cannot open directory", "\(root)/\(StoreLayout.manifests)", errno: ENOENT)
        }
        return found
    }

    /// The manifest currently published for `key`, or nil (also nil when it does not parse).
    public func manifest(for key: String) throws -> Manifest? {
        try StoreKey.validate(key)
        guard let (directory, name) = try parent(of: StoreLayout.manifestPath(key), create: false, sync: false) else { return nil }
        guard let bytes = try directory.readIfExists(name) else { return nil }
        return try? Manifest.decode(Data(bytes))
    }

    /// Stores the blobs, then publishes the manifest, durably: `stage`, then the
    /// one durable sequence (`syncAndPlace`), then a sync that makes the publish
    /// itself durable. When nothing is published (a `conflict` too), the blobs this
    /// call created are removed again, so a failed upload leaves nothing behind.
    @discardableResult
    public func commit(_ upload: ProcessedUpload) throws -> PublishOutcome {
        var created: [(StoreDirectory, String)] = []
        let outcome: PublishOutcome
        do {
            let step = syncAndPlace([try stage(upload, created: &created)])
            if let failure = step.synced { throw failure }
            outcome = try step.placed[0].get()
        } catch {
            for (directory, name) in created { directory.unlink(name) }
            throw error
        }
        if let failure = syncFilesystem() { throw failure }
        return outcome
    }

    /// Moves a complete temp manifest (`staged.manifestTemp` in `staged.tempDirectory`) to its
    /// name without ever replacing a manifest that `KeyConflict.decide` says to keep: `moveNew`
    /// creates only; on EEXIST the existing manifest is read and compared. The temp file is gone
    /// afterwards.
    func place(_ staged: Staged) throws -> PublishOutcome {
        let (directory, name, temp, manifest) = (staged.directory, staged.manifestName, staged.manifestTemp, staged.upload.manifest)
        let moved = staged.tempDirectory.moveNew(temp, to: directory, as: name)
        if moved == 0 { return .created }
        defer { staged.tempDirectory.unlink(temp) }
        guard moved == EEXIST else { throw SnapError.io("cannot publish manifest", directory.display(name), errno: moved) }
        let existing = (try? directory.readIfExists(name)).flatMap { $0 }.flatMap { try? Manifest.decode(Data($0)) }
        func replace() throws {
            let code = staged.tempDirectory.rename(temp, to: directory, as: name)
            guard code == 0 else { throw SnapError.io("cannot publish manifest", directory.display(name), errno: code) }
        }
        switch KeyConflict.decide(existing: existing, new: manifest, policy: onConflict) {
        case .keep:
            return .repeated
        case .refuse(let error):
            throw error
        case .rederive:
            try replace()
            return .rederived
        case .overwrite(let previous):
            try replace()
            return previous.map { .replaced(previous: $0) } ?? .created
        }
    }

    /// An upload whose blobs and manifest are written (not yet synced), the
    /// manifest under a temporary name: what `publishBatch` takes.
    public struct Staged: Sendable {
        public let upload: ProcessedUpload
        /// The manifest's directory and its name there.
        let directory: StoreDirectory
        let manifestName: String
        /// Where the temp manifest is: the directory of the upload's first blob (see `stage`), or `directory`.
        let tempDirectory: StoreDirectory
        let manifestTemp: String
    }

    /// Writes an upload's blobs, and its manifest under a temporary name, without
    /// syncing them, on the caller's thread: creating files is CPU work that
    /// belongs to the job, and the committer's thread then only syncs and renames.
    /// A blob is only ever linked into place complete; if a later one fails, the
    /// ones already there stay: another upload may already share them, and an
    /// unreferenced blob is harmless where a manifest without its blob is not.
    public func stage(_ upload: ProcessedUpload) throws -> Staged {
        var created: [(StoreDirectory, String)] = []
        return try stage(upload, created: &created)
    }

    /// `stage`, telling the caller which blobs it created (`commit` removes them if nothing is published).
    private func stage(_ upload: ProcessedUpload, created: inout [(StoreDirectory, String)]) throws -> Staged {
        try StoreKey.validate(upload.manifest.key)
        // `blobs/sha256` is looked at once per upload, and each fan-out directory by one
        // `fstatat` below it (`blobDirectory`), instead of two path walks, an `openat` and
        // a `close` per blob (docs/performance.md).
        let blobs = try blobsDirectory(sync: false)
        var firstBlobDirectory: StoreDirectory?
        for blob in upload.blobs {
            let directory = try blobDirectory(of: blob, in: blobs, sync: false)
            if firstBlobDirectory == nil { firstBlobDirectory = directory }
            if try put(blob, in: directory, as: blob.hex, sync: false) { created.append((directory, blob.hex)) }
        }
        let (directory, name) = try manifestDirectory(for: upload.manifest.key, create: true, sync: false)
        // The temp manifest is written beside the upload's first blob and moved into
        // `manifests` when published, so that its inode comes from that fan-out directory's
        // block group (spread over the disk, `OpenDirectories.child`) rather than all of a
        // store's from the one group of `manifests`: on ext4 without a journal, each new inode
        // walks past every inode freed in its group in the last minute, and the manifests of a
        // store deleted just before were all there (a tenth of a 1,000-snap backfill's CPU
        // right after one, docs/performance-log.md). Beside the manifest when the two are on
        // different file systems (a rename cannot cross them).
        let tempDirectory = firstBlobDirectory.flatMap { blobDirectory in
            blobDirectory.device != nil && blobDirectory.device == directory.device ? blobDirectory : nil
        } ?? directory
        let temp = tempDirectory.tempName(for: name)
        try tempDirectory.writeNew(temp, manifestFile(upload.manifest), sync: false)
        return Staged(upload: upload, directory: directory, manifestName: name, tempDirectory: tempDirectory, manifestTemp: temp)
    }

    /// The durable write order, in one place (`commit`, `publishBatch` and the
    /// group committer all go through it): one filesystem sync makes every staged
    /// blob and temp manifest durable, and any renames made before it; only then is
    /// each manifest put in place (link, or rename when `KeyConflict` says so). Those
    /// renames are durable after the next sync. A manifest is therefore only ever
    /// visible once its blobs are durable. When the sync fails, nothing is placed and
    /// the temp manifests are removed.
    /// - Returns: the sync's failure, or one result per upload, in order.
    public func syncAndPlace(_ staged: [Staged]) -> (synced: SnapError?, placed: [Result<PublishOutcome, SnapError>]) {
        if let failure = syncFilesystem() {
            for item in staged { discard(item) }
            return (failure, staged.map { _ in .failure(failure) })
        }
        return (nil, staged.map { item in
            do {
                return .success(try place(item))
            } catch {
                return .failure(error as? SnapError ?? SnapError(.io, "\(error)"))
            }
        })
    }

    /// Publishes staged uploads with two filesystem syncs in all instead of
    /// about eight fsyncs each (`syncAndPlace`, then the sync that makes the renames durable).
    /// - Returns: one result per upload, in order; nil means committed.
    public func publishBatch(_ staged: [Staged]) -> [SnapError?] {
        let step = syncAndPlace(staged)
        if let failure = step.synced { return staged.map { _ in failure } }
        let results = step.placed.map { result -> SnapError? in
            if case .failure(let error) = result { return error }
            return nil
        }
        if let failure = syncFilesystem() {
            // The renames may or may not be durable: report failure, leave the
            // files (each one is complete and points at durable blobs).
            return results.map { $0 ?? failure }
        }
        return results
    }

    /// Removes a staged upload's temporary manifest (its blobs stay: see `stage`).
    public func discard(_ staged: Staged) {
        staged.tempDirectory.unlink(staged.manifestTemp)
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

    /// Writes one blob unless it is already there. Returns true if this call created it.
    @discardableResult
    public func put(_ blob: Blob, sync: Bool = true) throws -> Bool {
        // Unsynced, a new fan-out directory is made durable by the same sync as
        // the blob (in a fresh store, each of up to 256 fsyncs waited for a device
        // flush and blocked the worker).
        let directory = try blobDirectory(of: blob, in: try blobsDirectory(sync: sync), sync: sync)
        return try put(blob, in: directory, as: blob.hex, sync: sync)
    }

    private func put(_ blob: Blob, in directory: StoreDirectory, as name: String, sync: Bool) throws -> Bool {
        if directory.exists(name) { return try verifyExisting(name, in: directory, blob, sync: sync) }
        let temp = directory.tempName(for: blob.hex)
        try directory.writeNew(temp, blob.bytes, sync: sync)
        // Never over an existing file, unlike rename(2).
        let code = directory.moveNew(temp, name)
        if code != 0 {
            directory.unlink(temp)
            if code == EEXIST { return try verifyExisting(name, in: directory, blob, sync: sync) }
            throw SnapError.io("cannot move blob into place at", directory.display(name), errno: code)
        }
        if sync { try directory.sync() }
        return true
    }

    /// An existing blob with the same bytes is reused. One whose bytes do not
    /// hash to its name (a crash before a group sync can leave an empty file)
    /// is garbage and is replaced; one that is intact but different cannot exist.
    private func verifyExisting(_ name: String, in directory: StoreDirectory, _ blob: Blob, sync: Bool) throws -> Bool {
        let existing = try directory.readIfExists(name)
        if existing == blob.bytes { return false }
        if let existing, SHA256.hex(existing) == blob.hex { return false }
        let temp = directory.tempName(for: blob.hex)
        try directory.writeNew(temp, blob.bytes, sync: sync)
        let code = directory.rename(temp, name)
        guard code == 0 else {
            directory.unlink(temp)
            throw SnapError.io("cannot replace the damaged blob", directory.display(name), errno: code)
        }
        if sync { try directory.sync() }
        return false
    }

    /// The manifest file's bytes: pretty JSON and a final newline.
    private func manifestFile(_ manifest: Manifest) -> [UInt8] {
        var bytes = manifest.jsonBytes(pretty: true)
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }
}
