import Foundation
import Testing
import SnapThumbConfig
import SnapThumbCore
import SnapThumbS3
import SnapThumbQueue
import SnapThumbTesting

/// The same through the program: `snapthumb config` and a backfill whose bucket endpoint
/// is only in the config file, with worker processes that must reach it too.
@Suite("Cloud settings, the program", .serialized, .enabled(if: Repo.motoAvailable))
struct CloudSettingsCommandTests {
    @Test("snapthumb config shows where each came from and never a secret")
    func configShows() throws {
        let path = Repo.tempDirectory() + "/c.json"
        try Data(#"{"s3": {"endpoint": "http://127.0.0.1:9"}}"#.utf8).write(to: URL(fileURLWithPath: path))
        let run = try CloudCLI.run(["config", "--config", path, "--json"],
                              environment: ["AWS_SECRET_ACCESS_KEY": "hush-hush", "AWS_ACCESS_KEY_ID": "AKID", "AWS_REGION": "eu-west-1",
                                            "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_S3": ""])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(!run.stdout.contains("hush-hush") && !run.stdout.contains("AKID"), "\(run.stdout)")
        let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: [String: Any]]
        #expect(object?["s3.endpoint"]?["value"] as? String == "http://127.0.0.1:9")
        #expect(object?["s3.endpoint"]?["source"] as? String == "s3.endpoint in \(path)")
        #expect(object?["s3.region"]?["source"] as? String == "AWS_REGION")
        #expect(object?["aws.secretAccessKey"]?["value"] as? String == "(set)")
    }

    @Test("a bucket endpoint only in the config file: backfill's workers publish to it")
    func endpointFromFile() throws {
        let (moto, bucket) = try Moto.withBucket()
        let dir = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/in", withIntermediateDirectories: true)
        for name in ["grey.jpg", "tiny.png"] {
            try FileManager.default.copyItem(atPath: Repo.sample("snaps") + "/" + name, toPath: dir + "/in/" + name)
        }
        let config = dir + "/c.json"
        try Data(#"{"s3": {"endpoint": "\#(moto.endpoint)", "region": "us-east-1", "maxAttempts": 2}}"#.utf8).write(to: URL(fileURLWithPath: config))
        var env = moto.environment()
        // Not in the environment: an endpoint there would win over the file.
        env["AWS_ENDPOINT_URL_S3"] = ""
        env["AWS_ENDPOINT_URL"] = ""
        let run = try CloudCLI.run(["backfill", dir + "/in", "--store", "s3://\(bucket)/t", "--jobs", "2", "--config", config], environment: env)
        #expect(run.status == 0, "\(run.stderr)")
        let keys = try moto.client(bucket: bucket).list(prefix: "t/manifests/").map(\.key).sorted()
        #expect(keys == ["t/manifests/grey.jpg.json", "t/manifests/tiny.png.json"], "\(keys)")
    }
}
