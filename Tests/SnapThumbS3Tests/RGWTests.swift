@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3

/// The bucket checks against a real S3 server: Ceph's RADOS Gateway (Debian's
/// radosgw, beast frontend) on 127.0.0.1, started by Scripts/rgw.sh. RGW compares
/// If-Match literally with the ETag it keeps without quotes, and ignores
/// x-amz-checksum-sha256: what moto alone would not show.
@Suite("Ceph RGW", .serialized, .enabled(if: Repo.rgwAvailable))
struct RGWTests {
    @Test("the create-only probe holds on RGW: If-None-Match: * is refused with 412")
    func createOnly() throws {
        let (rgw, bucket) = try RGW.withBucket()
        let store = S3Store(client: try rgw.client(bucket: bucket))
        try store.proveConditionalWrites()
        #expect(store.workerArgument.contains("create-only=proven"))
        // And a manifest of other bytes is refused at the server, not only by our check.
        let client = try rgw.client(bucket: bucket)
        #expect(try client.put("x", body: [1], contentType: "text/plain", createOnly: true).status == 200)
        #expect(try client.put("x", body: [2], contentType: "text/plain", createOnly: true).status == 412)
        #expect(try client.get("x")?.body == Data([1]))
    }
}
