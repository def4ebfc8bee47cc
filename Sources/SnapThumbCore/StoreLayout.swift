/// Where a store keeps things under its root, for every backend (a directory, a bucket's
/// prefix, or any other): the one definition. It lives here, below the store module, only
/// because a manifest's variants name their blob by this path (`Variant.path`); everything
/// else that spells a store path (the stores, their listings, `verify`) asks this.
public enum StoreLayout {
    /// The blobs' directory below the root: `blobs/sha256`.
    public static let blobs = "blobs/sha256"
    /// The manifests' directory below the root.
    public static let manifests = "manifests"
    /// What a blob's path looks like, for messages.
    public static let blobPattern = "\(blobs)/<2 hex>/<64 hex>"

    /// `blobs/sha256/<2 hex>/<64 hex>`: a blob's path below the root, named by its content.
    public static func blobPath(_ hex: some StringProtocol) -> String { "\(blobs)/\(hex.prefix(2))/\(hex)" }

    /// `manifests/<key>.json`: a key's manifest below the root.
    public static func manifestPath(_ key: some StringProtocol) -> String { "\(manifests)/\(key).json" }
}
