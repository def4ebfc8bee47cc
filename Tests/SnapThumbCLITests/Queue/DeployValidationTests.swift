import Foundation
import Testing
import SnapThumbTesting
import SnapThumbCore

/// deploy/kubernetes read as the API server and an operator would: every file against
/// Kubernetes' own schemas (kubernetes-validate, from Scripts/tools.sh) at the oldest version the
/// files state and the newest the validator ships; the parts no schema covers (KEDA, the
/// Prometheus Operator) checked for what this project relies on.
@Suite("deploy/ validation", .serialized)
struct DeployValidationTests {
    static let directory = Fixtures.root + "/deploy/kubernetes"
    static let tools = Fixtures.root + "/.venv-tools/bin"
    static var available: Bool { FileManager.default.isExecutableFile(atPath: tools + "/kubernetes-validate") }
    /// Kinds whose schemas are custom resources the validator does not ship.
    static let customKinds: Set<String> = ["ScaledObject", "TriggerAuthentication", "PodMonitor"]

    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    }

    /// Skips (or, with SNAPTHUMB_REQUIRE_TOOLS=1, fails) without the tools.
    static func requireTools() -> Bool {
        if available { return true }
        if ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_TOOLS"] == "1" {
            Issue.record("kubernetes-validate is not installed: run Scripts/tools.sh")
        }
        return false
    }

    /// The documents of a YAML file, as JSON objects (PyYAML, which kubernetes-validate brings).
    static func documents(_ file: String) throws -> [[String: Any]] {
        let script = "import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))"
        let result = try SystemdUnitTests.run(tools + "/python", ["-c", script, directory + "/" + file])
        #expect(result.status == 0, "\(result.output)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]])
    }

    static func path(_ object: Any?, _ keys: String...) -> Any? {
        var value = object
        for key in keys {
            if let index = Int(key), let array = value as? [Any] { value = index < array.count ? array[index] : nil }
            else { value = (value as? [String: Any])?[key] }
        }
        return value
    }

    @Test("every file validates, strictly, against Kubernetes 1.29 (the stated minimum) and the newest schema; 1.27 refuses backoffLimitPerIndex")
    func schemas() throws {
        guard Self.requireTools() else { return }
        #expect(Self.files.count == 4, "\(Self.files)")
        for version in ["1.29.0", nil] as [String?] {
            var arguments = ["--strict"]
            if let version { arguments += ["-k", version] }
            let result = try SystemdUnitTests.run(Self.tools + "/kubernetes-validate", arguments + Self.files.map { Self.directory + "/" + $0 })
            #expect(result.status == 0, "\(result.output)")
            for line in result.output.split(separator: "\n") where !line.hasPrefix("INFO ") {
                // Only the custom resources lack a schema; anything else is a finding.
                let kind = line.firstMatch(of: /schema for kind (\w+)/).map { String($0.1) }
                #expect(kind.map(Self.customKinds.contains) == true, "\(line)")
            }
        }
        let old = try SystemdUnitTests.run(Self.tools + "/kubernetes-validate", ["--strict", "-k", "1.27.0", Self.directory + "/backfill-job.yaml"])
        #expect(old.output.contains("'backoffLimitPerIndex' was unexpected"), "the 1.29 minimum is real: \(old.output)")
        for file in Self.files {
            let text = try String(contentsOfFile: Self.directory + "/" + file, encoding: .utf8)
            #expect(text.contains("Needs Kubernetes 1.29 or later"), "\(file) states its Kubernetes version")
        }
    }

    @Test("images pinned to this version with a digest; Deployments probe /healthz and /readyz on the port SNAPTHUMB_LISTEN opens, and are scraped")
    func workloads() throws {
        guard Self.requireTools() else { return }
        for file in Self.files {
            let documents = try Self.documents(file)
            let configMap = try #require(documents.first { $0["kind"] as? String == "ConfigMap" }, "\(file) has its own ConfigMap")
            let account = try #require(documents.first { $0["kind"] as? String == "ServiceAccount" }, "\(file) has its own ServiceAccount")
            for workload in documents where ["Deployment", "Job"].contains(workload["kind"] as? String ?? "") {
                let pod = Self.path(workload, "spec", "template", "spec")
                #expect(Self.path(pod, "serviceAccountName") as? String == Self.path(account, "metadata", "name") as? String, "\(file)")
                let container = try #require(Self.path(pod, "containers", "0") as? [String: Any])
                let image = container["image"] as? String ?? ""
                #expect(image.hasPrefix("ghcr.io/flick/snapthumb:\(SnapThumbVersion.current)@sha256:") && image.count == "ghcr.io/flick/snapthumb:\(SnapThumbVersion.current)@sha256:".count + 64,
                        "\(file): \(image)")
                let sources = (container["envFrom"] as? [[String: Any]] ?? []).compactMap { Self.path($0, "configMapRef", "name") as? String }
                #expect(sources == [Self.path(configMap, "metadata", "name") as? String ?? "?"], "\(file): the workload reads its own ConfigMap")
                guard workload["kind"] as? String == "Deployment" else { continue }
                let data = configMap["data"] as? [String: String] ?? [:]
                let listen = try #require(data["SNAPTHUMB_LISTEN"], "\(file): the ConfigMap turns the endpoints on")
                let port = Int(listen.split(separator: ":").last ?? "")
                let ports = container["ports"] as? [[String: Any]] ?? []
                #expect(ports.contains { $0["name"] as? String == "http" && $0["containerPort"] as? Int == port }, "\(file): \(ports)")
                #expect(Self.path(container, "livenessProbe", "httpGet", "path") as? String == "/healthz", "\(file)")
                #expect(Self.path(container, "readinessProbe", "httpGet", "path") as? String == "/readyz", "\(file)")
                #expect(Self.path(container, "startupProbe", "httpGet", "path") as? String == "/readyz", "\(file)")
                let annotations = Self.path(workload, "spec", "template", "metadata", "annotations") as? [String: String] ?? [:]
                #expect(annotations == ["prometheus.io/scrape": "true", "prometheus.io/port": "\(port ?? 0)", "prometheus.io/path": "/metrics"], "\(file)")
            }
        }
    }

    @Test("KEDA scales on the queue and subscription the Deployment reads (from env, not repeated), as the workload on AWS; a PodMonitor selects the consume pods")
    func autoscaling() throws {
        guard Self.requireTools() else { return }
        for (file, trigger, key, variable) in [("consume.yaml", "aws-sqs-queue", "queueURLFromEnv", "QUEUE_URL"),
                                               ("consume-gke.yaml", "gcp-pubsub", "subscriptionNameFromEnv", "SUBSCRIPTION_NAME")] {
            let documents = try Self.documents(file)
            let scaled = try #require(documents.first { $0["kind"] as? String == "ScaledObject" })
            let deployment = try #require(documents.first { $0["kind"] as? String == "Deployment" })
            let configMap = try #require(documents.first { $0["kind"] as? String == "ConfigMap" })
            #expect(Self.path(scaled, "spec", "scaleTargetRef", "name") as? String == Self.path(deployment, "metadata", "name") as? String)
            let metadata = try #require(Self.path(scaled, "spec", "triggers", "0", "metadata") as? [String: String])
            #expect(Self.path(scaled, "spec", "triggers", "0", "type") as? String == trigger)
            #expect(metadata[key] == variable && (configMap["data"] as? [String: String])?[variable] != nil, "\(file): \(metadata)")
            #expect(metadata["queueURL"] == nil && metadata["subscriptionName"] == nil, "\(file): not repeated")
            let auth = try #require(documents.first { $0["kind"] as? String == "TriggerAuthentication" })
            #expect(Self.path(scaled, "spec", "triggers", "0", "authenticationRef", "name") as? String == Self.path(auth, "metadata", "name") as? String)
            if trigger == "aws-sqs-queue" {
                #expect(Self.path(auth, "spec", "podIdentity") as? [String: String] == ["provider": "aws", "identityOwner": "workload"])
                let monitor = try #require(documents.first { $0["kind"] as? String == "PodMonitor" })
                #expect(Self.path(monitor, "spec", "selector", "matchLabels") as? [String: String]
                        == Self.path(deployment, "spec", "template", "metadata", "labels") as? [String: String])
                #expect(Self.path(monitor, "spec", "podMetricsEndpoints", "0", "port") as? String == "http")
            }
        }
    }
}
