import Foundation
import SnapThumbCore
import SnapThumbStore

/// `snapthumb verify`: re-hashes every blob and checks every manifest, on any store. Each
/// backend's inventory walks its own objects (`StoreInventory.verify`); this module gives
/// it the manifest schema it holds.
public enum StoreVerifier {
    public typealias Report = StoreVerification

    /// A directory: a missing `blobs/sha256` or `manifests` is a problem, not an error.
    public static func verify(root: String) throws -> Report {
        try verify(DirectoryInventory(root: root, requireLayout: false))
    }

    /// A store opened by scheme (`StoreLocation.openInventory`).
    public static func verify(_ inventory: any StoreInventory) throws -> StoreVerification {
        try inventory.verify(schema: schemaValidator())
    }

    /// The manifest schema's validator; an `internal` error when the schema cannot be found.
    public static func schemaValidator() throws -> ManifestValidator {
        let schema: JSONSchemaValidator
        do { schema = try ManifestSchema.validator() } catch { throw SnapError(.internal, "\(error)") }
        return { schema.validate($0) }
    }
}
