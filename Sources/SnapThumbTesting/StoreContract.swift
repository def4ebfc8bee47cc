import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbVerify
import SystemKit
import Testing

/// What every store backend does the same, checked through what the commands use: the writer
/// and the inventory, both opened by scheme (`StoreLocation`), and `verify`. Run against the
/// directory, the bucket (moto) and the in-memory store; a new backend runs it too.
public enum StoreContract {
    /// A backend to check.
    public struct Subject {
        /// What names it (a path, `s3://…`, `memory://…`): nothing must be stored there yet.
        public var argument: String
        /// The registry it is opened through.
        public var schemes: [any StoreScheme]
        public var options: StoreOpenOptions
        /// Writes bytes at a path below the store's root, as damage would.
        public var overwrite: (String, [UInt8]) throws -> Void

        public init(argument: String, schemes: [any StoreScheme], options: StoreOpenOptions = StoreOpenOptions(),
                    overwrite: @escaping (String, [UInt8]) throws -> Void) {
            self.argument = argument
            self.schemes = schemes
            self.options = options
            self.overwrite = overwrite
        }
    }

    static func upload(_ sample: String, key: String) throws -> ProcessedUpload {
        try Fixtures.process(Fixtures.bytes(Fixtures.sample(sample)), key: key)
    }

    public static func check(_ subject: Subject, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let writer = try StoreLocation.open(subject.argument, schemes: subject.schemes, options: subject.options)
        let inventory = try StoreLocation.openInventory(subject.argument, schemes: subject.schemes, options: subject.options)
        let (keyA, keyB) = ("contract/a.jpg", "contract/b.png")

        // Empty.
        #expect(try inventory.manifests(prefix: "").isEmpty, sourceLocation: sourceLocation)
        #expect(try inventory.blobs().isEmpty, sourceLocation: sourceLocation)
        #expect(try inventory.manifestBytes(keyA) == nil, sourceLocation: sourceLocation)
        #expect(try writer.manifest(for: keyA) == nil, sourceLocation: sourceLocation)

        // Publishing: created, a repeat (a conflict comes last: its blobs may stay, as orphans).
        let a = try upload("snaps/phone-portrait.jpg", key: keyA)
        let b = try upload("snaps/alpha.png", key: keyB)
        let other = try upload("snaps/landscape.webp", key: keyA)
        #expect(try writer.commit(a) == .created, sourceLocation: sourceLocation)
        #expect(try writer.commit(a) == .repeated, sourceLocation: sourceLocation)
        #expect(try writer.commit(b) == .created, sourceLocation: sourceLocation)
        #expect(try writer.manifest(for: keyA) == a.manifest, sourceLocation: sourceLocation)

        // The inventory: keys sorted and by prefix, the manifest's bytes, every blob by its hex digits.
        #expect(try inventory.manifests(prefix: "").map(\.name) == [keyA, keyB], sourceLocation: sourceLocation)
        #expect(try inventory.manifests(prefix: "contract/b").map(\.name) == [keyB], sourceLocation: sourceLocation)
        #expect(try inventory.manifestBytes(keyA) == a.manifest.jsonBytes(pretty: true) + [UInt8(ascii: "\n")], sourceLocation: sourceLocation)
        let blobs = Dictionary((a.blobs + b.blobs).map { ($0.hex, $0.bytes) }, uniquingKeysWith: { first, _ in first })
        #expect(try inventory.blobs().map(\.name) == blobs.keys.sorted(), sourceLocation: sourceLocation)
        for (hex, bytes) in blobs {
            #expect(try inventory.blobBytes(hex) == bytes, sourceLocation: sourceLocation)
            #expect(inventory.blobLocation(hex).hasSuffix("/" + StoreLayout.blobPath(hex)), sourceLocation: sourceLocation)
        }
        let clean = try StoreVerifier.verify(inventory)
        #expect(clean.problems == [] && clean.orphans == [] && clean.manifests == 2, "\(clean)", sourceLocation: sourceLocation)

        // gc's steps: a blob written after the cutoff stays; one set aside is gone until put back.
        let hex = try #require(b.blobs.map(\.hex).first { !a.blobs.map(\.hex).contains($0) }, sourceLocation: sourceLocation)
        let entry = try #require(try inventory.blobs().first { $0.name == hex }, sourceLocation: sourceLocation)
        #expect(try inventory.setAside(entry, unlessWrittenAfter: entry.modified - 1) == nil, sourceLocation: sourceLocation)
        let aside = try #require(try inventory.setAside(entry, unlessWrittenAfter: .infinity), sourceLocation: sourceLocation)
        #expect(try inventory.blobBytes(hex) == nil, sourceLocation: sourceLocation)
        let missing = try StoreVerifier.verify(inventory)
        #expect(missing.problems.contains { $0.hasSuffix("points at a missing blob \(StoreLayout.blobPath(hex))") }, "\(missing.problems)", sourceLocation: sourceLocation)
        try inventory.putBack(aside)
        #expect(try inventory.blobBytes(hex) == blobs[hex], sourceLocation: sourceLocation)
        #expect(try StoreVerifier.verify(inventory).problems == [], sourceLocation: sourceLocation)

        // Damage: verify names the blob and the manifest that points at it.
        let damage = [UInt8]("not the blob's bytes\n".utf8)
        try subject.overwrite(StoreLayout.blobPath(hex), damage)
        let damaged = try StoreVerifier.verify(inventory)
        #expect(damaged.problems.contains { $0.hasSuffix("\(StoreLayout.blobPath(hex)): content hashes to sha256:\(SHA256.hex(damage)), not its name") },
                "\(damaged.problems)", sourceLocation: sourceLocation)
        #expect(damaged.problems.contains { $0.hasSuffix("points at a damaged blob \(StoreLayout.blobPath(hex))") }, "\(damaged.problems)", sourceLocation: sourceLocation)
        try subject.overwrite(StoreLayout.blobPath(hex), blobs[hex] ?? [])
        #expect(try StoreVerifier.verify(inventory).problems == [], sourceLocation: sourceLocation)

        // Other source bytes under a published key: a conflict, the published manifest kept.
        #expect(sourceLocation: sourceLocation, performing: { try writer.commit(other) }, throws: { ($0 as? SnapError)?.code == .conflict })
        #expect(try writer.manifest(for: keyA) == a.manifest, sourceLocation: sourceLocation)
        #expect(try inventory.manifestBytes(keyA) == a.manifest.jsonBytes(pretty: true) + [UInt8(ascii: "\n")], sourceLocation: sourceLocation)
    }
}
