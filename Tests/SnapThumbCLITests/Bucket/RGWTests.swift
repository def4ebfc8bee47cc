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
/// (The create-only probe against RGW, through the bucket store's API: SnapThumbS3Tests.)
@Suite("Ceph RGW", .serialized, .enabled(if: Repo.rgwAvailable))
struct RGWTests {
    @Test("first write, rerun (no PUT), re-derive and replace (If-Match unquoted), conflict, verify; PUTs once; User-Agent in the gateway's log")
    func publishCycle() throws {
        let (rgw, bucket) = try RGW.withBucket()
        try S3Scenarios.publishCycle(rgw, bucket: bucket)
        // The gateway's own access log: every request of ours says snapthumb/<version>.
        let log = try String(contentsOfFile: rgw.log, encoding: .utf8)
        let lines = log.split(separator: "\n").filter { $0.contains(" beast: ") && $0.contains("/\(bucket)") }
        #expect(lines.count > 20)
        let agent = "\"snapthumb/\(SnapThumbVersion.current)\""
        #expect(lines.allSatisfy { $0.contains(agent) }, "\(lines.filter { !$0.contains(agent) }.prefix(3))")
    }

    @Test("watch, kill -9 mid-batch, restart: every upload published once, verify clean")
    func watchKillAndRestart() throws {
        let (rgw, bucket) = try RGW.withBucket()
        try S3WatchTests.killAndRestart(rgw, bucket: bucket)
    }
}

/// Your own S3-compatible server (MinIO, Garage, SeaweedFS, a port forwarded to a
/// remote one), on loopback: the same checks as against RGW, under a new prefix of
/// an existing bucket. Set SNAPTHUMB_TEST_S3_ENDPOINT (http://127.0.0.1:PORT),
/// SNAPTHUMB_TEST_S3_BUCKET, SNAPTHUMB_TEST_S3_ACCESS_KEY_ID and
/// SNAPTHUMB_TEST_S3_SECRET_ACCESS_KEY (docs/bucket.md: Tests).
final class OwnS3: S3Server, @unchecked Sendable {
    let name = "your endpoint"
    let endpoint: String
    let port: Int
    let accessKeyID: String
    let secretAccessKey: String
    let bucket: String

    static var environment: [String: String] { ProcessInfo.processInfo.environment }
    static var configured: Bool { environment["SNAPTHUMB_TEST_S3_ENDPOINT"] != nil }

    init() throws {
        let env = Self.environment
        guard let endpoint = env["SNAPTHUMB_TEST_S3_ENDPOINT"], let url = URLComponents(string: endpoint), let port = url.port,
              ["127.0.0.1", "localhost"].contains(url.host ?? ""),
              let bucket = env["SNAPTHUMB_TEST_S3_BUCKET"], let key = env["SNAPTHUMB_TEST_S3_ACCESS_KEY_ID"],
              let secret = env["SNAPTHUMB_TEST_S3_SECRET_ACCESS_KEY"] else {
            throw SnapError(.config, "set SNAPTHUMB_TEST_S3_ENDPOINT (http://127.0.0.1:PORT: the tests connect only to loopback), SNAPTHUMB_TEST_S3_BUCKET, SNAPTHUMB_TEST_S3_ACCESS_KEY_ID and SNAPTHUMB_TEST_S3_SECRET_ACCESS_KEY")
        }
        (self.endpoint, self.port, self.bucket, accessKeyID, secretAccessKey) = (endpoint, port, bucket, key, secret)
    }
}

@Suite("Your S3 endpoint", .serialized, .enabled(if: OwnS3.configured))
struct OwnEndpointTests {
    @Test("first write, rerun (no PUT), re-derive, conflict, replace, verify; PUTs once; User-Agent")
    func publishCycle() throws {
        let server = try OwnS3()
        try S3Scenarios.publishCycle(server, bucket: server.bucket, prefix: "snapthumb-test-\(UUID().uuidString.lowercased().prefix(8))")
    }

    @Test("watch, kill -9 mid-batch, restart: every upload published once, verify clean")
    func watchKillAndRestart() throws {
        let server = try OwnS3()
        try S3WatchTests.killAndRestart(server, bucket: server.bucket, prefix: "snapthumb-test-\(UUID().uuidString.lowercased().prefix(8))")
    }
}
