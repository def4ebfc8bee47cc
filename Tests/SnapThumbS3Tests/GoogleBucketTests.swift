#if canImport(Glibc)
import Glibc
#endif
import Foundation
import HTTPKit
import Testing
import SnapThumbTesting
import SnapThumbStore
import SystemKit
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import VipsKit

/// Scripts/fake-google-auth.py with `--bucket`: a metadata server handing out tokens and a
/// Cloud Storage XML API stand-in that takes only the latest one, on 127.0.0.1; stopped
/// when the test closes its standard input (it is this test's own child).
final class FakeGoogleBucket: Sendable {
    let server: ServerProcess
    let port: Int
    let bucket: String

    init(bucket: String, revokeFirst: Bool = false) throws {
        self.bucket = bucket
        server = try ServerProcess("/usr/bin/env", ["python3", "\(Repo.root)/Scripts/fake-google-auth.py", "--public-key", "/dev/null",
                                                    "--client-email", "unused@example.com", "--bucket", bucket] + (revokeFirst ? ["--revoke-first"] : []))
        let first = server.firstLine
        guard first.hasPrefix("port "), let port = Int(first.dropFirst(5)) else {
            server.stop()
            throw SnapError(.internal, "fake-google-auth.py did not start: \(first)")
        }
        self.port = port
    }

    /// No HMAC key: the metadata server's tokens, for a bucket whose provider is gcs.
    var environment: [String: String] {
        ["GCE_METADATA_HOST": "127.0.0.1:\(port)", "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:\(port)", "SNAPTHUMB_S3_PROVIDER": "gcs"]
    }

    struct Stats: Decodable {
        let issued: Int
        let bucket_ok: Int
        let bucket_refused: Int
        let sigv4: Int
        let generations_asked: [Int64]
    }

    func stats() throws -> Stats {
        try JSONDecoder().decode(Stats.self, from: HTTPTransport().sendBlocking(HTTPRequest(method: "GET", url: URL(string: "http://127.0.0.1:\(port)/stats")!)).body)
    }

    func stop() { server.stop() }
}

/// The bucket path of Cloud Storage notifications: bearer tokens instead of an HMAC key,
/// and reading exactly the generation announced, checked against its size and MD5.
@Suite("Cloud Storage: bearer tokens and generations", .serialized)
struct GoogleBucketTests {
    init() { GoogleBucketAuthorization.install() }

    @Test("without an HMAC key, Google credentials: every bucket request carries Authorization: Bearer (a 401 fetches a new token once), never SigV4; nothing secret in descriptions")
    func bearer() throws {
        let fake = try FakeGoogleBucket(bucket: "snap-gcs", revokeFirst: true)
        let configuration = try S3Configuration(url: "s3://snap-gcs/in/", environment: fake.environment)
        let bearer = try #require(configuration.bearer)
        #expect("\(bearer)".contains("metadata server"))
        let client = S3Client(configuration: configuration, retry: S3RetryPolicy(attempts: 3, base: 0.01, cap: 0.05))
        try client.checkAccess()
        let put = try client.put("in/a b.jpg", body: Array("snap".utf8), contentType: "image/jpeg")
        #expect(put.status == 200)
        #expect(try client.get("in/a b.jpg")?.body == Data("snap".utf8))
        let stats = try fake.stats()
        #expect(stats.bucket_refused == 1, "the revoked first token is refused once, then replaced")
        #expect(stats.bucket_ok == 3)
        #expect(stats.issued == 2)
        #expect(stats.sigv4 == 0)
        for text in ["\(configuration)", "\(configuration.credentials)", "\(bearer)", String(reflecting: bearer)] {
            #expect(!text.contains("fake-metadata-token"), "\(text)")
        }
    }

    @Test("S3 without keys stays a config error that names both ways; an unusable key file is a config error naming the file")
    func noCredentials() throws {
        let plain = #expect(throws: SnapError.self) { try S3Configuration(url: "s3://bucket-x/", environment: [:]) }
        #expect(plain?.code == .config)
        #expect(plain?.message.contains("AWS_ACCESS_KEY_ID") == true && plain?.message.contains("GOOGLE_APPLICATION_CREDENTIALS") == true)
        let missing = #expect(throws: SnapError.self) {
            try S3Configuration(url: "s3://bucket-x/", environment: ["GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json"])
        }
        #expect(missing?.code == .config)
        #expect(missing?.message.contains("/nonexistent/key.json") == true, "\(missing?.message ?? "")")
        // An HMAC key wins: SigV4 as before.
        let keyed = try S3Configuration(url: "s3://bucket-x/", environment: ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret", "SNAPTHUMB_S3_PROVIDER": "gcs"])
        #expect(keyed.bearer == nil)
    }

    @Test("the announced generation is read (?generation=N); a replaced or deleted one is superseded; bytes other than those announced are unreadable")
    func generations() throws {
        let fake = try FakeGoogleBucket(bucket: "snap-gcs")
        let sources = try S3Sources(url: "s3://snap-gcs/in/", environment: fake.environment)
        let client = sources.client
        let first = Array("first bytes".utf8), second = Array("second, longer bytes".utf8)
        let g1 = try #require(Int64(try client.put("in/snap 1.jpg", body: first, contentType: "image/jpeg").header("x-goog-generation") ?? ""))
        let path = "s3://snap-gcs/in/snap 1.jpg"
        func expectation(_ generation: Int64, _ bytes: [UInt8]) -> SourceExpectation {
            SourceExpectation(generation: generation, size: Int64(bytes.count), md5: MD5.digest(bytes))
        }
        let read = try sources.read(path, limit: 1 << 20, expecting: expectation(g1, first))
        #expect(read.bytes(0 ..< read.count) == first)

        // The notification says other bytes than that generation holds: read twice, refused.
        let wrong = #expect(throws: SnapError.self) { try sources.read(path, limit: 1 << 20, expecting: expectation(g1, second)) }
        #expect(wrong?.code == .unreadable)
        #expect(wrong?.message.contains("generation \(g1)") == true && wrong?.message.contains("the notification says \(second.count)") == true, "\(wrong?.message ?? "")")

        let g2 = try #require(Int64(try client.put("in/snap 1.jpg", body: second, contentType: "image/jpeg").header("x-goog-generation") ?? ""))
        let replaced = #expect(throws: SnapError.self) { try sources.read(path, limit: 1 << 20, expecting: expectation(g1, first)) }
        #expect(replaced?.code == .superseded)
        #expect(replaced?.message.contains("replaced by generation \(g2)") == true, "\(replaced?.message ?? "")")
        let newer = try sources.read(path, limit: 1 << 20, expecting: expectation(g2, second))
        #expect(newer.count == second.count)

        try client.delete("in/snap 1.jpg")
        let deleted = #expect(throws: SnapError.self) { try sources.read(path, limit: 1 << 20, expecting: expectation(g2, second)) }
        #expect(deleted?.code == .superseded)
        #expect(deleted?.message.contains("deleted") == true)
        // Announced as over the input limit: refused without a request (the generations asked stay two).
        let large = #expect(throws: SnapError.self) { try sources.read(path, limit: 4, expecting: SourceExpectation(generation: g2 + 1, size: 5)) }
        #expect(large?.code == .tooLarge)
        #expect(Set(try fake.stats().generations_asked) == [g1, g2])
    }

    @Test("moto ignores ?generation= (the live object is read) and the query is signed: the size and MD5 check still refuses bytes other than those announced", .enabled(if: Repo.motoAvailable))
    func motoIgnoresGenerations() throws {
        let (moto, bucket) = try Moto.withBucket()
        let sources = try S3Sources(url: "s3://\(bucket)/in/", environment: moto.environment())
        let bytes = Array("moto bytes".utf8)
        _ = try sources.client.put("in/x.jpg", body: bytes, contentType: "image/jpeg")
        let path = "s3://\(bucket)/in/x.jpg"
        let good = try sources.read(path, limit: 1 << 20, expecting: SourceExpectation(generation: 42, size: Int64(bytes.count), md5: MD5.digest(bytes)))
        #expect(good.count == bytes.count)
        let bad = #expect(throws: SnapError.self) {
            try sources.read(path, limit: 1 << 20, expecting: SourceExpectation(generation: 42, size: Int64(bytes.count), md5: MD5.digest(Array("other".utf8))))
        }
        #expect(bad?.code == .unreadable)
        #expect(bad?.message.contains("MD5") == true)
    }

    @Test("the generation is part of the signed canonical request")
    func signedQuery() {
        let signer = SigV4Signer(credentials: S3Credentials(accessKeyID: "AKID", secretAccessKey: "secret"), region: "auto")
        let request = SigV4Signer.Request(method: "GET", path: "/snap-gcs/in/a b.jpg", query: [("generation", "1732540000000001")],
                                          headers: [("Host", "storage.googleapis.com")], payloadHash: SigV4Signer.emptyPayloadHash)
        let canonical = signer.canonicalRequest(request).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(canonical[1] == "/snap-gcs/in/a%20b.jpg")
        #expect(canonical[2] == "generation=1732540000000001")
        var other = request
        other.query = [("generation", "1732540000000002")]
        #expect(signer.signature(request, amzDate: "20261125T160000Z") != signer.signature(other, amzDate: "20261125T160000Z"))
    }
}
