@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3
import VipsKit

/// Issue 28: `ls`, `get` and `gc` on a bucket store, against moto.
@Suite("S3 store tools", .serialized, .enabled(if: Repo.motoAvailable))
struct S3StoreToolsTests {
    @Test("ls lists every key, get returns the checked blob, gc deletes just the orphan and the bucket verifies")
    func tools() throws {
        let (moto, bucket) = try Moto.withBucket()
        let env = moto.environment()
        let store = "s3://\(bucket)/thumbs"
        let out = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: out) }
        let processed = try CloudCLI.run(["process", Repo.sample("snaps/grey.jpg"), Repo.sample("snaps/tiny.png"), "--store", store], environment: env)
        #expect(processed.status == 0, "\(processed.stderr)")
        let client = try moto.client(bucket: bucket)
        let orphan = Array("bytes no manifest names".utf8)
        let hex = SHA256.hex(orphan)
        _ = try client.put("thumbs/blobs/sha256/\(hex.prefix(2))/\(hex)", body: orphan, contentType: "application/octet-stream")
        let before = try client.list(prefix: "thumbs/").map(\.key)

        let ls = try CloudCLI.run(["ls", store], environment: env)
        #expect(ls.status == 0, "\(ls.stderr)")
        #expect(ls.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] } == ["grey.jpg", "tiny.png"])
        let json = try CloudCLI.run(["ls", store, "--json", "ti"], environment: env)
        let line = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(line?["key"] as? String == "tiny.png", "\(json.stdout)")

        let manifest = try Manifest.decode(try #require(try client.get("thumbs/manifests/grey.jpg.json")).body)
        for variant in ["square100", "pixel100"] {
            let file = "\(out)/\(variant)"
            let get = try CloudCLI.run(["get", store, "grey.jpg", "--variant", variant, "--output", file], environment: env)
            #expect(get.status == 0, "\(get.stderr)")
            let blob = try #require(try client.get("thumbs/\(manifest.variants[variant]!.path)")).body
            #expect(FileManager.default.contents(atPath: file) == blob)
        }

        let kept = try CloudCLI.run(["gc", store], environment: env)
        #expect(kept.status == 0 && kept.stdout.isEmpty && kept.stderr.contains("1 orphan(s) younger than 1d kept"), "\(kept.stdout)\(kept.stderr)")
        let dry = try CloudCLI.run(["gc", store, "--grace", "0", "--dry-run"], environment: env)
        #expect(dry.status == 0 && dry.stdout.hasPrefix("would delete \(store)/blobs/sha256/\(hex.prefix(2))/\(hex)"), "\(dry.stdout)\(dry.stderr)")
        #expect(try client.list(prefix: "thumbs/").map(\.key) == before)

        let gc = try CloudCLI.run(["gc", store, "--grace", "0"], environment: env)
        #expect(gc.status == 0 && gc.stdout.split(separator: "\n").count == 1 && gc.stdout.hasPrefix("deleted "), "\(gc.stdout)\(gc.stderr)")
        #expect(Set(try client.list(prefix: "thumbs/").map(\.key)) == Set(before).subtracting(["thumbs/blobs/sha256/\(hex.prefix(2))/\(hex)"]))
        let verify = try CloudCLI.run(["verify", store], environment: env)
        #expect(verify.status == 0 && !verify.stderr.contains("orphan:"), "\(verify.stdout)\(verify.stderr)")
    }

    @Test("a listing's LastModified is read as seconds since 1970")
    func lastModified() {
        #expect(S3XML.seconds(iso8601: "1970-01-01T00:00:00.000Z") == 0)
        #expect(S3XML.seconds(iso8601: "2026-11-25T16:04:37.500Z") == 1_795_622_677.5)
        #expect(S3XML.seconds(iso8601: "2000-02-29T12:00:00Z") == 951_825_600)
        #expect(S3XML.seconds(iso8601: "yesterday") == nil)
    }
}
