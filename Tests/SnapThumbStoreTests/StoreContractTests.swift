import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbTesting
import Testing

/// The store contract (`StoreContract`) on the directory and on the test-only in-memory
/// backend, both opened through the scheme registry; the bucket runs it in SnapThumbS3Tests.
@Suite("Store contract")
struct StoreContractTests {
    @Test("the directory store keeps the store contract")
    func directory() throws {
        let root = Fixtures.tempDirectory() + "/store"
        defer { Fixtures.remove((root as NSString).deletingLastPathComponent) }
        try StoreContract.check(.init(argument: root, schemes: [MemoryStoreScheme()]) { path, bytes in
            try Data(bytes).write(to: URL(fileURLWithPath: "\(root)/\(path)"))
        })
    }

    @Test("a new backend is one type and one registry line: the in-memory store keeps the contract")
    func memory() throws {
        let name = "contract-\(UUID().uuidString)"
        try StoreContract.check(.init(argument: "memory://\(name)", schemes: [MemoryStoreScheme()]) { path, bytes in
            MemoryStore(name: name).overwrite(path, with: bytes)
        })
    }

    @Test("backfill sources by scheme: a directory path is local files, a scheme without sources is a config error")
    func sources() throws {
        let schemes: [any StoreScheme] = [MemoryStoreScheme()]
        #expect(try StoreLocation.openSources("./uploads", schemes: schemes, cloud: CloudSettings()) == nil)
        // The in-memory backend holds stores only: asked for sources, it says so instead of
        // letting the path be walked as a directory named "memory:".
        #expect {
            try StoreLocation.openSources("memory://x", schemes: schemes, cloud: CloudSettings())
        } throws: { error in
            (error as? SnapError)?.code == .config && (error as? SnapError)?.message.contains("holds stores only") == true
        }
        #expect(throws: SnapError.self) { try StoreLocation.openSources("gs://bucket/p", schemes: schemes, cloud: CloudSettings()) }
    }

    @Test("the registry opens what it claims and refuses what no scheme claims")
    func registry() throws {
        let schemes: [any StoreScheme] = [MemoryStoreScheme()]
        #expect(StoreLocation.scheme(for: "memory://x", schemes: schemes) is MemoryStoreScheme)
        #expect(StoreLocation.scheme(for: "./memory", schemes: schemes) == nil)
        #expect(try StoreLocation.openInventory("memory://x", schemes: schemes).location == "memory://x")
        #expect(throws: SnapError.self) { try StoreLocation.openInventory("memory://", schemes: schemes) }
        #expect(throws: SnapError.self) { try StoreLocation.openInventory("gs://bucket/p", schemes: schemes) }
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        // A directory that is not a store: refused, unless opened for verify.
        #expect(throws: SnapError.self) { try StoreLocation.openInventory(root, schemes: schemes) }
        #expect(try StoreLocation.openInventory(root, schemes: schemes, requireLayout: false).location == root)
    }
}
