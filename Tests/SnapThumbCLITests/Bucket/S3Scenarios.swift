@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbS3

/// The command-line checks every server of the suite must pass (moto, Ceph RGW).
enum S3Scenarios {
    static let samples = Repo.sample("snaps")

    /// The published manifest of `key` under `prefix`, read directly.
    static func manifest(_ server: any S3Server, _ bucket: String, _ prefix: String, _ key: String) throws -> Manifest? {
        try server.client(bucket: bucket).get("\(prefix)/manifests/\(key).json").map { try Manifest.decode($0.body) }
    }

    /// First write, rerun, re-derive (`--budget 3000`), conflict, replace and verify,
    /// through a proxy that counts requests: a fresh backfill PUTs each object once
    /// (at most one PUT more per worker), a rerun PUTs nothing, every request says
    /// `snapthumb/<version>`.
    static func publishCycle(_ server: any S3Server, bucket: String, prefix c: String = "c") throws {
        let proxy = try FaultProxy(upstreamPort: server.port)
        let env = server.environment(endpoint: proxy.endpoint)
        let tree = try S3CommandLineTests.uploadsTree()
        defer { try? FileManager.default.removeItem(atPath: tree) }
        let store = "s3://\(bucket)/\(c)"
        let client = try server.client(bucket: bucket)

        let fresh = try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: env)
        #expect(fresh.status == 0 && fresh.stderr.contains("6 processed"), "\(server.name): \(fresh.stderr)")
        let objects = try client.list(prefix: "\(c)/")
        #expect(objects.filter { $0.key.hasPrefix("\(c)/manifests/") }.count == 6)
        let freshPuts = proxy.stats.putCount
        #expect(freshPuts <= objects.count + 2, "\(server.name): \(freshPuts) PUTs for \(objects.count) objects: \(proxy.stats.puts.filter { $0.value > 1 })")

        let rerun = try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2"], environment: env)
        #expect(rerun.status == 0 && rerun.stderr.contains("6 skipped"), "\(server.name): \(rerun.stderr)")
        #expect(proxy.stats.putCount == freshPuts, "\(server.name): a rerun wrote")

        // A new recipe re-derives every key: its manifest is replaced (If-Match on the version read).
        let before = try #require(try manifest(server, bucket, c, "u0/grey.jpg"))
        let rederive = try CloudCLI.run(["backfill", tree, "--store", store, "--jobs", "2", "--budget", "3000"], environment: env)
        #expect(rederive.status == 0 && rederive.stderr.contains("6 processed"), "\(server.name): \(rederive.stderr)")
        #expect(!rederive.stderr.contains("kept changing") && !rederive.stderr.contains("refuses"))
        let after = try #require(try manifest(server, bucket, c, "u0/grey.jpg"))
        #expect(after.source.digest == before.source.digest && after.recipe.digest != before.recipe.digest)
        #expect(after.variants["square100"]?.budget == 3000)

        // Other bytes under a published key: a conflict, then --on-conflict replace.
        let other = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: other) }
        try FileManager.default.copyItem(atPath: "\(samples)/grey.jpg", toPath: "\(other)/k.jpg")
        let written = try CloudCLI.run(["process", "\(other)/k.jpg", "--store", store], environment: env)
        #expect(written.status == 0, "\(server.name): \(written.stderr)")
        let first = try #require(try manifest(server, bucket, c, "k.jpg"))
        try FileManager.default.removeItem(atPath: "\(other)/k.jpg")
        try FileManager.default.copyItem(atPath: "\(samples)/phone-portrait.jpg", toPath: "\(other)/k.jpg")
        let conflict = try CloudCLI.run(["process", "\(other)/k.jpg", "--store", store], environment: env)
        #expect(conflict.status == 1 && conflict.stderr.contains(": conflict: "), "\(server.name): \(conflict.stderr)")
        #expect(try manifest(server, bucket, c, "k.jpg") == first)
        let replace = try CloudCLI.run(["process", "\(other)/k.jpg", "--store", store, "--on-conflict", "replace"], environment: env)
        #expect(replace.status == 0 && replace.stderr.contains("replaced: k.jpg"), "\(server.name): \(replace.stderr)")
        let replaced = try #require(try manifest(server, bucket, c, "k.jpg"))
        #expect(replaced.source.digest != first.source.digest)
        #expect(try Manifest.decode(Data(replace.stdout.utf8)) == replaced)

        let verify = try CloudCLI.run(["verify", store], environment: env)
        #expect(verify.status == 0, "\(server.name): \(verify.stdout)\(verify.stderr)")
        #expect(verify.stderr.contains("7 manifests: ok"), "\(verify.stderr)")

        let agents = proxy.stats.user_agents
        #expect(Set(agents.keys) == ["snapthumb/\(SnapThumbVersion.current)"], "\(agents)")
    }
}
