import Foundation
import Testing
import SnapThumbConfig
import SnapThumbCore
import SnapThumbS3
import SnapThumbQueue
import SnapThumbTesting

/// The bucket's and queue's settings go through the one configuration layer: the
/// variables AWS users have, then the config file's `s3`/`sqs`/`google` sections, then
/// the defaults; and a worker process reaches the bucket its parent resolved.
@Suite("Cloud settings")
struct CloudSettingsTests {
    static let keys = ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"]

    static func file(_ json: String) throws -> ConfigFile {
        let dir = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/snapthumb.json"
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return try ConfigFile.load(path)
    }

    @Test("environment over file over default; the first variable set wins; an empty one counts as unset")
    func precedence() throws {
        let file = try Self.file(#"{"s3": {"region": "eu-west-3", "endpoint": "http://127.0.0.1:9", "maxAttempts": 2, "pathStyle": true, "provider": "gcs"}, "sqs": {"endpoint": "http://127.0.0.1:8"}}"#)
        let fromFile = try CloudSettings.resolve(ConfigLayers(flags: [:], environment: Self.keys.merging(["AWS_REGION": ""]) { $1 }, file: file))
        #expect(fromFile.region == ResolvedSetting("eu-west-3", from: .file(path: file.path, key: "s3.region")))
        #expect(fromFile.maxAttempts == 2 && fromFile.s3PathStyle == true)
        let c = try S3Configuration(url: "s3://thumbs/p", cloud: fromFile)
        #expect(c.region == "eu-west-3" && c.endpoint.absoluteString == "http://127.0.0.1:9" && c.maxAttempts == 2 && c.pathStyle && c.provider == .gcs)
        #expect(try SQSConfiguration(queueURL: "http://127.0.0.1:4566/1/q", cloud: fromFile).endpoint.absoluteString == "http://127.0.0.1:8")

        let env = Self.keys.merging(["AWS_DEFAULT_REGION": "ap-south-1", "AWS_ENDPOINT_URL": "http://10.0.0.1:7", "AWS_MAX_ATTEMPTS": "4"]) { $1 }
        let fromEnv = try CloudSettings.resolve(ConfigLayers(flags: [:], environment: env, file: file))
        #expect(fromEnv.region == ResolvedSetting("ap-south-1", from: .environment("AWS_DEFAULT_REGION")))
        #expect(fromEnv.maxAttempts == 4)
        #expect(try S3Configuration(url: "s3://thumbs/p", cloud: fromEnv).endpoint.absoluteString == "http://10.0.0.1:7")
        #expect(try SQSConfiguration(queueURL: "http://127.0.0.1:4566/1/q", cloud: fromEnv).endpoint.absoluteString == "http://10.0.0.1:7")
        let both = try CloudSettings.resolve(environment: env.merging(["AWS_REGION": "us-west-2"]) { $1 })
        #expect(both.region?.value == "us-west-2")

        // The URL's own options win over everything.
        #expect(try S3Configuration(url: "s3://thumbs/p?provider=s3&path-style=false", cloud: fromFile).provider == .s3)
        // Nothing set: the AWS defaults.
        let none = try S3Configuration(url: "s3://thumbs/p", cloud: CloudSettings.resolve(environment: Self.keys))
        #expect(none.region == "us-east-1" && none.endpoint.absoluteString == "https://s3.us-east-1.amazonaws.com" && none.maxAttempts == 6)
    }

    @Test("a value that cannot be used names where it came from; keys are not read from a file")
    func errorsNameTheirSource() throws {
        let bad = #expect(throws: SnapError.self) { try CloudSettings.resolve(environment: ["AWS_MAX_ATTEMPTS": "0"]) }
        #expect(bad?.message.contains("AWS_MAX_ATTEMPTS=0") == true, "\(bad?.message ?? "")")
        let file = try Self.file(#"{"s3": {"pathStyle": "sometimes"}}"#)
        let style = #expect(throws: SnapError.self) { try CloudSettings.resolve(ConfigLayers(flags: [:], environment: [:], file: file)) }
        #expect(style?.message.contains("s3.pathStyle in \(file.path)") == true, "\(style?.message ?? "")")
        let secret = #expect(throws: SnapError.self) { try Self.file(#"{"s3": {"secretAccessKey": "x"}}"#) }
        #expect(secret?.message.contains("unknown setting s3.secretAccessKey") == true, "\(secret?.message ?? "")")
        let provider = #expect(throws: SnapError.self) {
            try S3Configuration(url: "s3://thumbs/", cloud: CloudSettings.resolve(environment: Self.keys.merging(["SNAPTHUMB_S3_PROVIDER": "azure"]) { $1 }))
        }
        #expect(provider?.message.contains("SNAPTHUMB_S3_PROVIDER=azure") == true, "\(provider?.message ?? "")")
    }

    @Test("the worker's store URL carries what is not a secret, and opens the same bucket from the keys alone")
    func workerURL() throws {
        let file = try Self.file(#"{"s3": {"region": "eu-north-1", "endpoint": "http://127.0.0.1:9000", "maxAttempts": 3}, "google": {"credentials": "/etc/key dir/k.json"}}"#)
        let parent = try S3Configuration(url: "s3://thumbs/a", cloud: CloudSettings.resolve(ConfigLayers(flags: [:], environment: Self.keys, file: file)), pathStyle: true)
        let url = parent.workerURL(createOnly: .proven)
        #expect(!url.contains("secret") && !url.contains("AKID"), "\(url)")
        let child = try S3Configuration(url: url, cloud: CloudSettings.resolve(environment: Self.keys))
        #expect(child.region == "eu-north-1" && child.endpoint == parent.endpoint && child.maxAttempts == 3 && child.pathStyle)
        #expect(child.createOnlyCheck == .proven && child.location == "s3://thumbs/a/")
        #expect(child.cloud.googleCredentials?.value == "/etc/key dir/k.json")
    }
}
