@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
@testable import SnapThumbS3
import SnapThumbCore
import SnapThumbRunner

/// The signer against AWS's published vectors: the Signature Version 4 test
/// suite (the cases that apply to S3: no path normalisation, which S3 does not
/// do) and the four single-chunk examples of the S3 API reference.
@Suite struct SigV4Tests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/sigv4-test-suite").path

    static var cases: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixtures)) ?? [])
            .filter { $0.hasSuffix(".req") }.map { String($0.dropLast(4)) }.sorted()
    }

    /// A `.req` file: request line, headers, blank line, body.
    static func parse(_ text: String) -> (SigV4Signer.Request, amzDate: String) {
        let parts = text.components(separatedBy: "\n\n")
        let lines = parts[0].components(separatedBy: "\n")
        let requestLine = lines[0].split(separator: " ")
        let method = String(requestLine[0])
        let target = String(requestLine[1 ..< requestLine.count - 1].joined(separator: " "))
        let pathAndQuery = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(pathAndQuery[0]).removingPercentEncoding!
        var query: [(String, String)] = []
        if pathAndQuery.count > 1 {
            for pair in pathAndQuery[1].split(separator: "&") {
                let nv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                query.append((String(nv[0]).removingPercentEncoding!, nv.count > 1 ? String(nv[1]).removingPercentEncoding! : ""))
            }
        }
        var headers: [(String, String)] = []
        var amzDate = ""
        for line in lines.dropFirst() {
            if line.hasPrefix(" ") || line.hasPrefix("\t") { continue }
            let nv = line.split(separator: ":", maxSplits: 1)
            headers.append((String(nv[0]), String(nv[1])))
            if nv[0].lowercased() == "x-amz-date" { amzDate = String(nv[1]) }
        }
        let body = parts.count > 1 ? parts[1...].joined(separator: "\n\n") : ""
        let request = SigV4Signer.Request(method: method, path: path, query: query, headers: headers,
                                          payloadHash: VipsKitSHA.hex(Array(body.utf8)))
        return (request, amzDate)
    }

    static func read(_ name: String, _ ext: String) throws -> String {
        try String(contentsOfFile: "\(fixtures)/\(name).\(ext)", encoding: .utf8)
    }

    @Test func theSuiteIsHere() {
        #expect(Self.cases.count >= 20)
    }

    @Test(arguments: cases)
    func testSuiteVector(_ name: String) throws {
        let signer = SigV4Signer(credentials: S3Credentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                                 region: "us-east-1", service: "service")
        let (request, amzDate) = Self.parse(try Self.read(name, "req"))
        #expect(signer.canonicalRequest(request) == (try Self.read(name, "creq")))
        #expect(signer.stringToSign(request, amzDate: amzDate) == (try Self.read(name, "sts")))
        #expect(signer.authorization(request, amzDate: amzDate) == (try Self.read(name, "authz")))
    }

    // The S3 API reference, "Signature Calculations for the Authorization Header:
    // Transferring Payload in a Single Chunk", examples.
    static let s3Signer = SigV4Signer(credentials: S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), region: "us-east-1")
    static let host = ("Host", "examplebucket.s3.amazonaws.com")
    static let day = Date(timeIntervalSince1970: 1_369_353_600) // 2013-05-24T00:00:00Z

    func signed(_ request: SigV4Signer.Request) -> String {
        let headers = Self.s3Signer.sign(request, at: Self.day)
        return headers.first { $0.0 == "Authorization" }!.1
    }

    @Test func getObjectWithRange() {
        let request = SigV4Signer.Request(method: "GET", path: "/test.txt", headers: [Self.host, ("Range", "bytes=0-9")],
                                          payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(signed(request) == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        var withDate = request
        withDate.headers += [("x-amz-date", "20130524T000000Z"), ("x-amz-content-sha256", SigV4Signer.emptyPayloadHash)]
        #expect(VipsKitSHA.hex(Array(Self.s3Signer.canonicalRequest(withDate).utf8)) == "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972")
    }

    @Test func putObject() {
        let body = Array("Welcome to Amazon S3.".utf8)
        let hash = VipsKitSHA.hex(body)
        #expect(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let request = SigV4Signer.Request(method: "PUT", path: "/test$file.text",
                                          headers: [Self.host, ("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
                                          payloadHash: hash)
        #expect(signed(request).hasSuffix("SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"))
        #expect(Self.s3Signer.canonicalRequest(request).hasPrefix("PUT\n/test%24file.text\n\n"))
    }

    @Test func getBucketLifecycle() {
        let request = SigV4Signer.Request(method: "GET", path: "/", query: [("lifecycle", "")], headers: [Self.host],
                                          payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(signed(request).hasSuffix("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"))
    }

    @Test func listObjects() {
        // The order on the wire does not matter: canonical query parameters are sorted.
        let request = SigV4Signer.Request(method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: [Self.host],
                                          payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(signed(request).hasSuffix("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"))
    }

    @Test func sessionTokenIsSignedAndSecretsNeverPrinted() {
        let credentials = S3Credentials(accessKeyID: "AKIDSECRETID", secretAccessKey: "topsecretvalue", sessionToken: "tokenvalue")
        let signer = SigV4Signer(credentials: credentials, region: "eu-west-1")
        let headers = signer.sign(SigV4Signer.Request(method: "GET", path: "/k", headers: [("host", "h")], payloadHash: SigV4Signer.emptyPayloadHash), at: Self.day)
        #expect(headers.contains { $0.0 == "x-amz-security-token" && $0.1 == "tokenvalue" })
        #expect(headers.last!.1.contains("x-amz-security-token"))
        for text in ["\(credentials)", String(reflecting: credentials), "\(signer)"] {
            #expect(!text.contains("topsecretvalue") && !text.contains("tokenvalue"))
        }
    }

    @Test func uriEncoding() {
        #expect(SigV4Signer.uriEncode("a b/c+d~é", keepSlash: true) == "a%20b/c%2Bd~%C3%A9")
        #expect(SigV4Signer.uriEncode("a/b", keepSlash: false) == "a%2Fb")
    }
}

/// Configuration from the environment, and the provider's headers.
@Suite struct S3ConfigurationTests {
    static let keys = ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secretvalue"]

    @Test func endpointRegionAndAddressing() throws {
        var c = try S3Configuration(url: "s3://thumbs/a/b", environment: Self.keys)
        #expect(c.bucket == "thumbs" && c.prefix == "a/b/" && c.region == "us-east-1" && !c.pathStyle)
        #expect(c.endpoint.absoluteString == "https://s3.us-east-1.amazonaws.com")
        c = try S3Configuration(url: "s3://thumbs", environment: Self.keys.merging(["AWS_DEFAULT_REGION": "eu-west-1"]) { $1 })
        #expect(c.region == "eu-west-1" && c.prefix == "")
        c = try S3Configuration(url: "s3://thumbs/", environment: Self.keys.merging(["AWS_REGION": "ap-south-1", "AWS_DEFAULT_REGION": "eu-west-1",
                                                                                 "AWS_ENDPOINT_URL": "http://localhost:9000",
                                                                                 "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9001"]) { $1 })
        #expect(c.region == "ap-south-1" && c.endpoint.absoluteString == "http://127.0.0.1:9001" && c.pathStyle)
        c = try S3Configuration(url: "s3://thumbs/", environment: Self.keys.merging(["AWS_ENDPOINT_URL": "http://localhost:9000"]) { $1 })
        #expect(c.pathStyle)
        c = try S3Configuration(url: "s3://thumbs/", environment: Self.keys.merging(["AWS_ENDPOINT_URL": "https://minio.example.net"]) { $1 })
        #expect(!c.pathStyle)
        c = try S3Configuration(url: "s3://thumbs/", environment: Self.keys.merging(["AWS_ENDPOINT_URL": "https://minio.example.net", "SNAPTHUMB_S3_PATH_STYLE": "true"]) { $1 })
        #expect(c.pathStyle)
        c = try S3Configuration(url: "s3://thumbs/x?provider=gcs&path-style=true", environment: Self.keys)
        #expect(c.provider == .gcs && c.pathStyle && c.prefix == "x/")
        #expect(throws: SnapError.self) { try S3Configuration(url: "s3://thumbs/", environment: [:]) }
        #expect(throws: SnapError.self) { try S3Configuration(url: "s3://Bad_Bucket!/", environment: Self.keys) }
        #expect(throws: SnapError.self) { try S3Configuration(url: "s3://thumbs/a/../b", environment: Self.keys) }
        #expect(!"\(c)".contains("secretvalue") && !"\(c)".contains("AKIDEXAMPLE"))
    }

    @Test func storeArgumentsThatAreNeitherPathNorS3AreRefused() throws {
        for bad in ["gs://b/p", "s3:b", "http://x/y", "s3://", "", "file:///tmp/x"] {
            #expect(throws: SnapError.self, "\(bad)") { try StoreLocation.check(bad, schemes: [S3StoreScheme()]) }
        }
        for good in ["./store", "/srv/store", "store", "s3://thumbs/v1", "./a:b", "2026:11"] {
            #expect(throws: Never.self, "\(good)") { try StoreLocation.check(good, schemes: [S3StoreScheme()]) }
        }
    }

    @Test func providerHeaders() throws {
        let body = Array("hello".utf8)
        let s3 = S3Client(configuration: try S3Configuration(url: "s3://thumbs/", environment: Self.keys))
        let (h1, hash) = s3.putHeaders(body: body, contentType: "image/jpeg", createOnly: true, ifMatch: nil)
        #expect(hash == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        #expect(h1.contains { $0 == ("If-None-Match", "*") })
        #expect(h1.contains { $0 == ("x-amz-checksum-sha256", "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=") })
        let gcs = S3Client(configuration: try S3Configuration(url: "s3://thumbs/", environment: Self.keys, provider: .gcs))
        let (h2, _) = gcs.putHeaders(body: body, contentType: "image/jpeg", createOnly: true, ifMatch: nil)
        #expect(h2.contains { $0 == ("x-goog-if-generation-match", "0") })
        #expect(h2.contains { $0 == ("Content-MD5", "XUFAKrxLKna5cZ2REBfFkg==") })
        #expect(!h2.contains { $0.0 == "If-None-Match" })
    }
}

/// `--shard I/N`: the hash is part of the contract (machines of different
/// releases must agree on the split), so its values are pinned here.
@Suite struct ShardTests {
    @Test func stableHashAndParsing() {
        #expect(Shard.hash("") == 0xcbf2_9ce4_8422_2325)
        #expect(Shard.hash("a") == 0xaf63_dc4c_8601_ec8c)
        #expect(Shard.hash("foobar") == 0x85944171f73967e8)
        #expect(Shard("0/1") != nil && Shard("3/4") != nil)
        for bad in ["4/4", "-1/2", "1", "1/0", "a/b", "1/2/3", ""] { #expect(Shard(bad) == nil, "\(bad)") }
        let keys = (0 ..< 1000).map { "2026/11/\($0).jpg" }
        let shards = (0 ..< 4).map { Shard("\($0)/4")! }
        for key in keys { #expect(shards.filter { $0.contains(key) }.count == 1) }
        #expect(shards.allSatisfy { shard in keys.filter(shard.contains).count > 150 })
    }
}
