import Foundation
import SnapThumbCore
import SnapThumbStore
import SystemKit
import Synchronization

/// A store kept in this process's memory (`memory://NAME`), for tests: what a new backend
/// takes, one type and one scheme line (`StoreLocation.open(…, schemes: [MemoryStoreScheme()])`).
/// It has the writer and the inventory and none of the optional capabilities; `verify` is the
/// one every inventory gets. Objects are kept under `StoreLayout`'s paths, so its bytes are the
/// directory's and the bucket's. The same name opens the same objects until the process ends.
public struct MemoryStore: StoreBackend, StoreInventory {
    public let name: String
    public let onConflict: ConflictPolicy
    private let shelf: Shelf

    /// The objects, by their path below the root.
    final class Shelf: Sendable {
        struct Object {
            var bytes: [UInt8]
            var modified: Double
            var version: Int
        }
        struct State {
            var objects: [String: Object] = [:]
            var writes = 0
        }
        let state = Mutex(State())

        func put(_ path: String, _ bytes: [UInt8], in state: inout State) {
            state.writes += 1
            state.objects[path] = Object(bytes: bytes, modified: Date().timeIntervalSince1970, version: state.writes)
        }
    }

    private static let shelves = Mutex<[String: Shelf]>([:])

    /// The store named `name`: its objects are shared by every `MemoryStore` of that name.
    public init(name: String, onConflict: ConflictPolicy = .refuse) {
        self.name = name
        self.onConflict = onConflict
        shelf = Self.shelves.withLock { shelves in
            if let shelf = shelves[name] { return shelf }
            let shelf = Shelf()
            shelves[name] = shelf
            return shelf
        }
    }

    public var location: String { MemoryStoreScheme.prefix + name }

    // MARK: The writer

    public func manifest(for key: String) throws -> Manifest? {
        try manifestBytes(key).flatMap { try? Manifest.decode(Data($0)) }
    }

    @discardableResult
    public func commit(_ upload: ProcessedUpload) throws -> PublishOutcome {
        let manifest = upload.manifest
        try StoreKey.validate(manifest.key)
        let file = manifest.jsonBytes(pretty: true) + [UInt8(ascii: "\n")]
        return try shelf.state.withLock { state throws(SnapError) -> PublishOutcome in
            // Blobs first, by content: one whose bytes do not hash to its name is replaced.
            for blob in upload.blobs where state.objects[blob.path].map({ SHA256.hex($0.bytes) != blob.hex }) ?? true {
                shelf.put(blob.path, blob.bytes, in: &state)
            }
            let path = StoreLayout.manifestPath(manifest.key)
            guard let existing = state.objects[path] else {
                shelf.put(path, file, in: &state)
                return .created
            }
            switch KeyConflict.decide(existing: try? Manifest.decode(Data(existing.bytes)), new: manifest, policy: onConflict) {
            case .keep: return .repeated
            case .refuse(let error): throw error
            case .rederive:
                shelf.put(path, file, in: &state)
                return .rederived
            case .overwrite(let previous):
                shelf.put(path, file, in: &state)
                return previous.map { .replaced(previous: $0) } ?? .created
            }
        }
    }

    public func makeCommitter<Tag: Sendable>(maxDelay: Double, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) -> any UploadCommitter<Tag> {
        ImmediateCommitter(store: self, completion: completion)
    }

    // MARK: The inventory

    public func manifests(prefix: String) throws -> [StoreEntry] {
        let base = StoreLayout.manifests + "/"
        return entries { path in
            guard path.hasPrefix(base), path.hasSuffix(".json") else { return nil }
            let key = String(path.dropFirst(base.count).dropLast(".json".count))
            return key.hasPrefix(prefix) ? key : nil
        }
    }

    public func manifestBytes(_ key: String) throws -> [UInt8]? {
        try StoreKey.validate(key)
        return shelf.state.withLock { $0.objects[StoreLayout.manifestPath(key)]?.bytes }
    }

    public func blobs() throws -> [StoreEntry] {
        entries { path in
            let name = path.split(separator: "/").last ?? ""
            return BlobName.isValid(name) && path == StoreLayout.blobPath(name) ? String(name) : nil
        }
    }

    public func blobBytes(_ hex: String) throws -> [UInt8]? {
        shelf.state.withLock { $0.objects[StoreLayout.blobPath(hex)]?.bytes }
    }

    /// Takes the blob out unless it was written after `cutoff` or since it was listed (another version).
    public func setAside(_ blob: StoreEntry, unlessWrittenAfter cutoff: Double) throws -> SetAsideBlob? {
        shelf.state.withLock { state in
            let path = StoreLayout.blobPath(blob.name)
            guard let object = state.objects[path], object.modified <= cutoff, "\(object.version)" == blob.version else { return nil }
            state.objects[path] = nil
            return SetAsideBlob(entry: blob, bytes: object.bytes)
        }
    }

    public func putBack(_ blob: SetAsideBlob) throws {
        guard let bytes = blob.bytes else { return }
        shelf.state.withLock { state in
            let path = StoreLayout.blobPath(blob.entry.name)
            if state.objects[path] == nil { shelf.put(path, bytes, in: &state) }
        }
    }

    public func discard(_ blob: SetAsideBlob) throws {}

    // MARK: For tests

    /// Writes `bytes` at `path` below the root, as a fault would (a damaged blob).
    public func overwrite(_ path: String, with bytes: [UInt8]) {
        shelf.state.withLock { shelf.put(path, bytes, in: &$0) }
    }

    /// The objects whose path `name` maps to a name, as entries sorted by name.
    private func entries(_ name: (String) -> String?) -> [StoreEntry] {
        shelf.state.withLock { state in
            state.objects.compactMap { path, object in
                name(path).map { StoreEntry(name: $0, bytes: object.bytes.count, modified: object.modified, version: "\(object.version)") }
            }
        }.sorted { $0.name < $1.name }
    }
}

/// Commits each upload as it is submitted.
final class ImmediateCommitter<Tag: Sendable>: UploadCommitter, Sendable {
    let store: MemoryStore
    let completion: @Sendable (Tag, ProcessedUpload, SnapError?) -> Void

    init(store: MemoryStore, completion: @escaping @Sendable (Tag, ProcessedUpload, SnapError?) -> Void) {
        self.store = store
        self.completion = completion
    }

    func submit(_ upload: ProcessedUpload, tag: Tag) {
        do {
            try store.commit(upload)
            completion(tag, upload, nil)
        } catch {
            completion(tag, upload, error as? SnapError ?? SnapError(.internal, describe(error)))
        }
    }

    func flush() {}
    func finish() {}
}

/// `memory://NAME`: the registry line of the in-memory store.
public struct MemoryStoreScheme: StoreScheme {
    public static let prefix = "memory://"
    public init() {}

    public func claims(_ argument: String) -> Bool { argument.hasPrefix(Self.prefix) }

    public func check(_ argument: String) throws {
        let name = argument.dropFirst(Self.prefix.count)
        guard !name.isEmpty, !name.contains("/") else { throw SnapError(.config, "\(argument): a memory store is memory://NAME") }
    }

    public func open(_ argument: String, options: StoreOpenOptions) throws -> any StoreBackend {
        MemoryStore(name: String(argument.dropFirst(Self.prefix.count)), onConflict: options.onConflict)
    }

    public func openInventory(_ argument: String, options: StoreOpenOptions) throws -> any StoreInventory {
        MemoryStore(name: String(argument.dropFirst(Self.prefix.count)), onConflict: options.onConflict)
    }
}
