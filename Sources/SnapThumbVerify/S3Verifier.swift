import SnapThumbStore
import SnapThumbS3

/// `snapthumb verify s3://BUCKET/PREFIX` (the bucket's own verifier, `S3Store.verify`), with
/// how many objects are read at once.
public enum S3Verifier {
    public typealias Result = StoreVerification

    public static func verify(_ store: S3Store, parallel: Int = 8) throws -> Result {
        try store.verify(schema: StoreVerifier.schemaValidator(), parallel: parallel)
    }
}
