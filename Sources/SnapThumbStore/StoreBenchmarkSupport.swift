import SnapThumbCore

/// The store's part of the stage benchmarks in `Benchmarks/` (`@_spi(Benchmarks) import SnapThumbStore`).
@_spi(Benchmarks) public enum StoreBenchmarkSupport {
    /// SHA-256 of each output (made unique by `salt`, so that every call writes new
    /// blobs) and one durable commit (blobs, manifest, fsyncs) into `store`.
    public static func hashAndStore(_ upload: ProcessedUpload, salt: Int, store: Store) throws {
        let blobs = upload.blobs.map { Blob($0.bytes + withUnsafeBytes(of: salt) { Array($0) }) }
        if let error = store.commitBatch([ProcessedUpload(manifest: upload.manifest, blobs: blobs)]).first ?? nil { throw error }
    }
}
