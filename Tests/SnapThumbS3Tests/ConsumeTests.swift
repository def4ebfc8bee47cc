#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import VipsKit

/// The queue's keys against moto's S3 on 127.0.0.1 (the built `snapthumb consume`: SnapThumbCLITests).
@Suite("consume: a fleet on bucket events", .serialized, .enabled(if: Repo.motoAvailable))
struct ConsumeTests {
    @Test("the queue's keys are backfill's keys: SourceScope against S3Sources' listing of the same objects")
    func keysAgreeWithBackfill() throws {
        let (moto, bucket) = try Moto.withBucket()
        let client = try moto.client(bucket: bucket)
        let objects = ["in/a.jpg", "in/sub dir/b+c.jpg", "in/.hidden.jpg", "in/d/.e/f.jpg", "in/marker/", "in/ü é.png", "in-x/y.jpg", "out/z.jpg", "in/%41.jpg"]
        for key in objects { _ = try client.put(key, body: [1, 2, 3], contentType: "application/octet-stream") }
        let listed = try S3Sources(url: "s3://\(bucket)/in", environment: moto.environment()).list()
        let scope = SourceScope(bucket: bucket, prefix: "in/")
        var placed: [String] = []
        for key in objects {
            if case .upload(let relative) = scope.place(bucket: bucket, objectKey: key) { placed.append(relative) }
        }
        #expect(placed.sorted() == listed.files.map(\.relativePath).sorted())
        #expect(scope.place(bucket: "other", objectKey: "in/a.jpg") == .outside)
    }
}
