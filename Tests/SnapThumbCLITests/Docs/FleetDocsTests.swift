import Foundation
import Testing
import SnapThumbTesting

/// docs/fleet.md's AWS wiring, run as an operator would paste it: every `sh` block of the section,
/// in order, with the AWS CLI (Scripts/tools.sh) against moto's S3 and SQS; then the bucket's
/// uploads must reach the queue, with the redrive policy and the queue policy in place.
@Suite("docs/fleet.md", .serialized, .enabled(if: Repo.motoAvailable))
struct FleetDocsTests {
    static let aws = Fixtures.root + "/.venv-tools/bin/aws"

    /// The `sh` blocks of a section (list items' indentation removed).
    static func shellBlocks(_ text: String, section: String) throws -> [String] {
        let body = try #require(text.components(separatedBy: "\n## " + section + "\n").dropFirst().first?.components(separatedBy: "\n## ").first)
        var blocks: [String] = []
        var current: [String]?
        var indent = 0
        for line in body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```sh" {
                current = []
                indent = line.prefix { $0 == " " }.count
            } else if current != nil, trimmed == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else if current != nil {
                current!.append(String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count))))
            }
        }
        return blocks
    }

    static func bash(_ script: String, in directory: String, environment: [String: String]) throws -> (status: Int32, output: String) {
        try ChildProcess.combined("/bin/bash", ["-euo", "pipefail", "-c", script],
                                  environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("AWS_") }.merging(environment) { $1 },
                                  directory: directory)
    }

    @Test("every command of 'Wiring a bucket to a queue (AWS)' runs as written against moto, and the bucket's uploads then reach the queue")
    func awsWiring() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.aws) else {
            if ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_TOOLS"] == "1" { Issue.record("the AWS CLI is not installed: run Scripts/tools.sh") }
            return
        }
        let text = try String(contentsOfFile: Fixtures.root + "/docs/fleet.md", encoding: .utf8)
        let blocks = try Self.shellBlocks(text, section: "Wiring a bucket to a queue (AWS)")
        #expect(blocks.count == 3, "\(blocks)")
        let createBucket = "aws s3api create-bucket --bucket flick-uploads --create-bucket-configuration LocationConstraint=eu-west-1"
        #expect(text.replacingOccurrences(of: "\n   ", with: " ").contains(createBucket))
        let (moto, _) = try Moto.withBucket()
        let directory = Fixtures.tempDirectory("snapthumb-fleet-docs")
        defer { Fixtures.remove(directory) }
        // The AWS CLI v1 sends SQS requests to sqs's legacy regional host whatever AWS_ENDPOINT_URL says:
        // an `aws` first on PATH adds --endpoint-url, the one thing that differs from an AWS account.
        try FileManager.default.createDirectory(atPath: directory + "/bin", withIntermediateDirectories: true)
        try "#!/bin/sh\nexec \(Self.aws) --endpoint-url \"$AWS_ENDPOINT_URL\" \"$@\"\n".write(toFile: directory + "/bin/aws", atomically: true, encoding: .utf8)
        chmod(directory + "/bin/aws", 0o755)
        let environment = ["AWS_ENDPOINT_URL": moto.endpoint, "AWS_ACCESS_KEY_ID": moto.accessKeyID, "AWS_SECRET_ACCESS_KEY": moto.secretAccessKey,
                           "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1", "PATH": directory + "/bin:/usr/bin:/bin"]
        let created = try Self.bash(createBucket, in: directory, environment: environment)
        #expect(created.status == 0, "\(created.output)")
        for block in blocks {
            let result = try Self.bash(block, in: directory, environment: environment)
            #expect(result.status == 0, "\(block)\n---\n\(result.output)")
        }
        let check = """
        url=$(aws sqs get-queue-url --queue-name snaps --query QueueUrl --output text)
        aws sqs get-queue-attributes --queue-url "$url" --attribute-names All --output json
        aws sqs receive-message --queue-url "$url" --max-number-of-messages 10 --output json > /dev/null || true
        echo hello > a.jpg
        aws s3api put-object --bucket flick-uploads --key snaps/2026/a.jpg --body a.jpg > /dev/null
        for i in 1 2 3 4 5; do aws sqs receive-message --queue-url "$url" --max-number-of-messages 10 --wait-time-seconds 1 --output json; done
        """
        let result = try Self.bash(check, in: directory, environment: environment)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("arn:aws:sqs:eu-west-1:123456789012:snaps-dlq") && result.output.contains("maxReceiveCount"), "\(result.output)")
        #expect(result.output.contains("s3.amazonaws.com") && result.output.contains("arn:aws:s3:::flick-uploads"), "the queue policy: \(result.output)")
        #expect(result.output.contains("VisibilityTimeout") && result.output.contains("\"60\""), "\(result.output)")
        #expect(result.output.contains("ObjectCreated:Put") && (result.output.contains("snaps/2026/a.jpg") || result.output.contains("snaps%2F2026%2Fa.jpg")), "the upload's event on the queue: \(result.output)")
    }
}
