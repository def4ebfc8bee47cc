@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import SnapThumbGoogle

/// Every `snapthumb` command line in deploy/ runs, with its variables substituted, against
/// moto's S3 and SQS on loopback: the deployment files cannot drift from the command line.
@Suite("deploy/ files", .serialized, .enabled(if: Repo.motoAvailable))
struct DeployFilesTests {
    struct CommandLine: CustomStringConvertible {
        let file: String
        let arguments: [String]
        var description: String { "\(file): snapthumb \(arguments.joined(separator: " "))" }
    }

    static let deploy = "\(Repo.root)/deploy"

    /// `args: [...]` lines of the Kubernetes files (JSON arrays) and `RUN snapthumb …` lines of the Containerfile.
    static func commandLines() throws -> [CommandLine] {
        var found: [CommandLine] = []
        let files = try FileManager.default.subpathsOfDirectory(atPath: deploy).sorted()
        for file in files {
            guard let text = try? String(contentsOfFile: "\(deploy)/\(file)", encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
                if line.hasPrefix("args:") {
                    let json = line.dropFirst("args:".count).trimmingCharacters(in: .whitespaces)
                    let arguments = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String], "\(file): \(line)")
                    found.append(CommandLine(file: file, arguments: arguments))
                } else if line.hasPrefix("RUN snapthumb ") {
                    found.append(CommandLine(file: file, arguments: line.dropFirst("RUN snapthumb ".count).split(separator: " ").map(String.init)))
                }
            }
        }
        return found
    }

    /// `$(NAME)` replaced from `values`; a name without a value fails the test.
    static func substitute(_ arguments: [String], _ values: [String: String]) throws -> [String] {
        try arguments.map { argument in
            var out = argument
            while let start = out.range(of: "$("), let end = out.range(of: ")", range: start.upperBound..<out.endIndex) {
                let name = String(out[start.upperBound..<end.lowerBound])
                let value = try #require(values[name], "no value for $(\(name)) in \(arguments)")
                out.replaceSubrange(start.lowerBound..<end.upperBound, with: value)
            }
            return out
        }
    }

    @Test("the files hold the command lines this test knows how to run, and the ConfigMap defines every variable they use")
    func inventory() throws {
        let lines = try Self.commandLines()
        #expect(Set(lines.map { $0.arguments.first ?? "" }) == ["consume", "backfill", "version"], "\(lines)")
        let configMap = try String(contentsOfFile: "\(Self.deploy)/kubernetes/consume.yaml", encoding: .utf8)
        for line in lines where line.file.hasPrefix("kubernetes/") {
            // Each file stands alone: the variables come from its own ConfigMap.
            let own = try String(contentsOfFile: "\(Self.deploy)/\(line.file)", encoding: .utf8)
            for argument in line.arguments {
                var rest = Substring(argument)
                while let start = rest.range(of: "$("), let end = rest.range(of: ")", range: start.upperBound..<rest.endIndex) {
                    let name = String(rest[start.upperBound..<end.lowerBound])
                    #expect(name == "JOB_COMPLETION_INDEX" || own.contains("\n  \(name): "),
                            "\(line.file) uses $(\(name)), which its own ConfigMap does not define")
                    rest = rest[end.upperBound...]
                }
            }
        }
        let job = try String(contentsOfFile: "\(Self.deploy)/kubernetes/backfill-job.yaml", encoding: .utf8)
        #expect(job.contains("completionMode: Indexed") && job.contains("completions: 4") && job.contains("\"$(JOB_COMPLETION_INDEX)/4\""))
        #expect(configMap.contains("type: aws-sqs-queue") && configMap.contains("kind: ScaledObject"))
        // The GKE variant: Workload Identity, KEDA on the subscription's backlog with the pod's identity.
        let gke = try String(contentsOfFile: "\(Self.deploy)/kubernetes/consume-gke.yaml", encoding: .utf8)
        for needed in ["iam.gke.io/gcp-service-account: ", "type: gcp-pubsub", "mode: SubscriptionSize", "value: \"", "provider: gcp",
                       "subscriptionNameFromEnv: SUBSCRIPTION_NAME", "SUBSCRIPTION_NAME: projects/", "\"gcppubsub://$(SUBSCRIPTION_NAME)\""] {
            #expect(gke.contains(needed), "consume-gke.yaml lacks \(needed)")
        }
        #expect(lines.filter { $0.file == "kubernetes/consume-gke.yaml" }.map { $0.arguments.first } == ["consume"])
        // The Job stands alone, on AWS and on GKE.
        #expect(lines.filter { $0.arguments.first == "backfill" }.map(\.file) == ["kubernetes/backfill-job-gke.yaml", "kubernetes/backfill-job.yaml"])
    }

    @Test("every command line runs: the image's smoke test, the sharded backfill's 4 pods (each key once), the consume Deployment (drains the queue, SIGTERM exits 0)")
    func run() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("deploy"), visibility: 10)
        try moto.notify(bucket: uploads, queueURL: queue)
        let client = try moto.client(bucket: uploads)
        let keys = ["a.jpg", "b c.jpg", "d+e/f.png", "g/h i+j.jpg", "k.jpg", "l/m.png"]
        for (i, key) in keys.enumerated() {
            let sample = Repo.sample("snaps/\(ConsumeTests.good[i % ConsumeTests.good.count])")
            _ = try client.put("snaps/" + key, body: [UInt8](try Data(contentsOf: URL(fileURLWithPath: sample))), contentType: "image/jpeg")
        }
        var values = ["QUEUE_URL": queue, "SOURCE_URL": "s3://\(uploads)/snaps/", "STORE_URL": "s3://\(thumbs)/v1"]
        let env = moto.environment()
        let lines = try Self.commandLines()

        for line in lines where line.arguments.first == "version" {
            let result = try CloudCLI.run(try Self.substitute(line.arguments, values), environment: env)
            #expect(result.status == 0, "\(line): \(result.stderr)")
        }

        // Each Indexed Job (AWS, GKE): every index, as Kubernetes would run them; together they
        // publish every key once (each into a store of its own; the consume run below uses the AWS one).
        let backfills = lines.filter { $0.arguments.first == "backfill" }
        #expect(backfills.count == 2)
        for line in backfills where line.file != "kubernetes/backfill-job.yaml" {
            let (_, own) = try Moto.withBucket()
            var values = values
            values["STORE_URL"] = "s3://\(own)/v1"
            for index in 0..<4 {
                values["JOB_COMPLETION_INDEX"] = "\(index)"
                let result = try CloudCLI.run(try Self.substitute(line.arguments, values), environment: env)
                #expect(result.status == 0, "\(line) [index \(index)]: \(result.stderr)")
            }
            #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: own, prefix: "v1/")) == Set(keys), "\(line)")
        }
        var processed = 0
        for line in backfills where line.file == "kubernetes/backfill-job.yaml" {
            for index in 0..<4 {
                values["JOB_COMPLETION_INDEX"] = "\(index)"
                let result = try CloudCLI.run(try Self.substitute(line.arguments, values), environment: env)
                #expect(result.status == 0, "\(line) [index \(index)]: \(result.stderr)")
                for event in result.stderr.split(separator: "\n") where event.contains("\"backfill finished\"") {
                    let object = try JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any]
                    // A number (or, from older builds, a string).
                    let value = object?["snap.processed"]
                    processed += (value as? Int) ?? Int(value as? String ?? "") ?? 0
                }
            }
        }
        #expect(processed == keys.count)
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/")) == Set(keys))

        // The Deployment: the bucket's events for the same keys are repeats, deleted; SIGTERM exits 0.
        let consumes = lines.filter { $0.arguments.first == "consume" && $0.file != "kubernetes/consume-gke.yaml" }
        #expect(consumes.count == 1)
        for line in consumes {
            // The ConfigMap's SNAPTHUMB_LISTEN, on a free loopback port; then the Deployment's probes, as the kubelet sends them.
            let text = try String(contentsOfFile: "\(Self.deploy)/\(line.file)", encoding: .utf8)
            #expect(text.contains("\n  SNAPTHUMB_LISTEN: 0.0.0.0:9090\n") && text.contains("{name: http, containerPort: 9090}"))
            let probes = text.matches(of: /httpGet: \{path: (\S+), port: http\}/).map { String($0.1) }
            #expect(Set(probes) == ["/healthz", "/readyz"], "\(probes)")
            let daemon = try Daemon(try Self.substitute(line.arguments, values), environment: env.merging(["SNAPTHUMB_LISTEN": "127.0.0.1:0"]) { $1 })
            let drained = try eventually(within: 60, every: 0.5) {
                let (visible, hidden) = try moto.depth(queue)
                return visible == 0 && hidden == 0 && daemon.log.components(separatedBy: "\"snap.result\":\"repeat\"").count - 1 == keys.count
            }
            #expect(drained, "\(line): \(daemon.log)")
            let address = try #require(ListenTests.address(in: daemon.log), "\(daemon.log)")
            for path in probes { #expect(try ListenTests.get(address, path).status == 200, "\(path)") }
            let scrape = text.firstMatch(of: /prometheus\.io\/path: (\S+)/).map { String($0.1) }
            let metrics = try ListenTests.get(address, "/metrics").body
            #expect(scrape == "/metrics" && metrics.contains("snapthumb_consume_messages_received_total"), "\(metrics)")
            #expect(daemon.terminate() == 0, "\(daemon.log)")
        }
    }

    @Test("the GKE Deployment's command line runs on the Pub/Sub emulator: Cloud Storage's notifications for keys already published are repeats, acknowledged; SIGTERM exits 0 (without the emulator: its arguments parse and it reaches the queue check)")
    func runGKE() throws {
        let lines = try Self.commandLines().filter { $0.file == "kubernetes/consume-gke.yaml" }
        let line = try #require(lines.first)
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        var values = ["SOURCE_URL": "s3://\(uploads)/snaps/", "STORE_URL": "s3://\(thumbs)/v1"]
        guard PubSubEmulatorProcess.installed else {
            // No emulator: a queue that cannot be reached is a start-up failure (exit 2) after every argument was accepted.
            values["SUBSCRIPTION_NAME"] = "projects/proj-x/subscriptions/snapthumb"
            values["DEAD_LETTER_TOPIC"] = "projects/proj-x/topics/snapthumb-dead-letters"
            let result = try CloudCLI.run(try Self.substitute(line.arguments, values),
                                     environment: moto.environment().merging(["PUBSUB_EMULATOR_HOST": "127.0.0.1:9"]) { $1 })
            #expect(result.status == 2 && result.stderr.contains("consume: the queue: "), "\(result.stderr)")
            return
        }
        let emulator = try PubSubEmulatorProcess.shared.get()
        let pubsub = try emulator.client()
        let project = try PubSubConsumeTests.Project(pubsub)
        values["SUBSCRIPTION_NAME"] = project.subscription.name
        values["DEAD_LETTER_TOPIC"] = project.dlq.name
        let client = try moto.client(bucket: uploads)
        let keys = ["a.jpg", "b c.jpg", "d+e/f.png"]
        var messages: [OutgoingMessage] = []
        for (i, key) in keys.enumerated() {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(ConsumeTests.good[i])"))))
            _ = try client.put("snaps/" + key, body: bytes, contentType: "image/jpeg")
            messages.append(PubSubConsumeTests.notification(bucket: uploads, name: "snaps/" + key, bytes: bytes, generation: Int64(100 + i)))
        }
        // Published once by a backfill; the notifications then make repeats.
        let backfill = try CloudCLI.run(["backfill", "s3://\(uploads)/snaps/", "--store", "s3://\(thumbs)/v1"], environment: moto.environment())
        #expect(backfill.status == 0, "\(backfill.stderr)")
        let topic = project.topic
        let sent = messages
        try await_ { _ = try await pubsub.publish(topic, sent) }
        let daemon = try Daemon(try Self.substitute(line.arguments, values), environment: moto.environment().merging(["PUBSUB_EMULATOR_HOST": emulator.host]) { $1 })
        let repeated = PubSubConsumeTests.untilDone(progress: { daemon.log.count }) {
            daemon.log.components(separatedBy: "\"snap.result\":\"repeat\"").count - 1 >= keys.count
        }
        #expect(repeated, "\(line): \(daemon.log)")
        #expect(daemon.terminate() == 0, "\(daemon.log)")
        #expect(Set(try ConsumeTests.manifestKeys(moto, bucket: thumbs, prefix: "v1/")) == Set(keys))
    }
}
