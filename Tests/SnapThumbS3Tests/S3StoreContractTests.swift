import Foundation
import SnapThumbConfig
import SnapThumbS3
import SnapThumbStore
import SnapThumbTesting
import Testing

/// The store contract (`StoreContract`, also run on the directory and the in-memory store)
/// on a bucket: moto's S3 server, opened through the scheme registry.
@Suite("S3 store contract", .enabled(if: Repo.motoAvailable))
struct S3StoreContractTests {
    @Test("the bucket store keeps the store contract")
    func bucket() throws {
        let (moto, bucket) = try Moto.withBucket()
        let client = try moto.client(bucket: bucket)
        let options = StoreOpenOptions(cloud: try CloudSettings.resolve(environment: moto.environment()))
        try StoreContract.check(.init(argument: "s3://\(bucket)/contract", schemes: [S3StoreScheme()], options: options) { path, bytes in
            _ = try client.put("contract/\(path)", body: bytes, contentType: "application/octet-stream")
        })
    }
}
