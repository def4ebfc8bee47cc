import Foundation
import HTTPKit
import SnapThumbConfig
import SnapThumbCore
import SnapThumbS3

// The S3 servers the bucket tests run against, on 127.0.0.1: moto (Scripts/moto.sh),
// Ceph's RADOS Gateway (Scripts/rgw.sh) and Scripts/fault-proxy.py in front of either.
// Shared by SnapThumbS3Tests (the bucket store through its API) and SnapThumbCLITests
// (`snapthumb` against a bucket): one moto server and one RGW cluster per test process.

/// The line Scripts/rgw.sh and Scripts/moto-server.py print once their S3 server answers.
private struct ServerInfo: Decodable {
    let endpoint: String
    let port: Int
    let access_key_id: String
    let secret_access_key: String
    /// rgw.sh's cluster directory.
    let dir: String?

    /// Reads it from the helper's first line; otherwise stops the helper and throws `failure`.
    static func read(_ helper: ServerProcess, _ failure: String) throws -> ServerInfo {
        guard let info = try? JSONDecoder().decode(ServerInfo.self, from: Data(helper.firstLine.utf8)) else {
            helper.stop()
            throw SnapError(.internal, "\(failure): \(helper.firstLine)")
        }
        return info
    }
}

/// An S3 server the tests run against, on 127.0.0.1, with a key allowed to use it.
public protocol S3Server: AnyObject, Sendable {
    var name: String { get }
    var endpoint: String { get }
    var port: Int { get }
    var accessKeyID: String { get }
    var secretAccessKey: String { get }
}

extension S3Server {
    /// The environment a snapthumb process needs to reach it (through `endpoint` if given).
    public func environment(endpoint: String? = nil, secret: String? = nil) -> [String: String] {
        ["AWS_ACCESS_KEY_ID": accessKeyID, "AWS_SECRET_ACCESS_KEY": secret ?? secretAccessKey,
         "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_S3": endpoint ?? self.endpoint]
    }

    public func client(bucket: String, endpoint: String? = nil, secret: String? = nil, retry: S3RetryPolicy = S3RetryPolicy(base: 0.02, cap: 0.2),
                       timeouts: RequestTimeouts = RequestTimeouts()) throws -> S3Client {
        let cloud = try CloudSettings.resolve(environment: environment(endpoint: endpoint, secret: secret))
        return S3Client(configuration: try S3Configuration(url: "s3://\(bucket)/", cloud: cloud), retry: retry, timeouts: timeouts)
    }

    /// A new, empty bucket (signed CreateBucket, like any other request).
    public func newBucket() throws -> String {
        let bucket = "t-" + UUID().uuidString.lowercased().prefix(18)
        try client(bucket: bucket).send("PUT", key: nil, accept: [200])
        return bucket
    }
}

/// Ceph's RADOS Gateway on 127.0.0.1 (`Scripts/rgw.sh serve`: ceph-mon, one memstore
/// ceph-osd and radosgw, all state in a temporary directory), with an S3 user.
public final class RGW: S3Server, @unchecked Sendable {  // set up in init, then only read
    public let name = "Ceph RGW"
    let helper: ServerProcess
    public let endpoint: String
    public let port: Int
    public let accessKeyID: String
    public let secretAccessKey: String
    /// Where its state and logs are (removed when it stops).
    public let directory: String
    /// The gateway's log: one `beast:` access line per request, with its User-Agent.
    public var log: String { directory + "/log/client.rgw.log" }

    /// Ceph's RADOS Gateway, started by Scripts/rgw.sh (test.sh installs it). Without
    /// radosgw these tests are skipped, unless SNAPTHUMB_REQUIRE_RGW=1 (set by test.sh)
    /// makes that a failure.
    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/radosgw")
            || ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_RGW"] == "1"
    }

    init() throws {
        helper = try ServerProcess("/bin/bash", ["\(Fixtures.root)/Scripts/rgw.sh", "serve"])
        let info = try ServerInfo.read(helper, "radosgw did not start (Scripts/rgw.sh serve)")
        endpoint = info.endpoint
        port = info.port
        accessKeyID = info.access_key_id
        secretAccessKey = info.secret_access_key
        directory = info.dir ?? ""
    }

    /// One cluster for the whole test process (it starts in 15-30 s); it stops
    /// when this process ends (the script's stdin closes).
    static let shared: Result<RGW, SnapError> = {
        do { return .success(try RGW()) } catch { return .failure(error as? SnapError ?? SnapError(.internal, "\(error)")) }
    }()

    public static func withBucket() throws -> (RGW, String) {
        let rgw = try shared.get()
        return (rgw, try rgw.newBucket())
    }
}

/// moto's S3 server on 127.0.0.1 in auth mode, with an IAM key allowed to use S3.
public final class Moto: S3Server, @unchecked Sendable {  // set up in init, then only read
    public let name = "moto"
    let helper: ServerProcess
    public let endpoint: String
    public let port: Int
    public let accessKeyID: String
    public let secretAccessKey: String

    static let python = "\(Fixtures.root)/.venv-moto/bin/python"

    /// moto is installed by Scripts/moto.sh (run by setup.sh and test.sh). Without it
    /// these tests are skipped, unless SNAPTHUMB_REQUIRE_MOTO=1 (set by test.sh) makes that a failure.
    public static var available: Bool {
        FileManager.default.isExecutableFile(atPath: "\(Fixtures.root)/.venv-moto/bin/moto_server")
            || ProcessInfo.processInfo.environment["SNAPTHUMB_REQUIRE_MOTO"] == "1"
    }

    init(buckets: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw SnapError(.config, "moto is not installed: run Scripts/moto.sh")
        }
        helper = try ServerProcess(Moto.python, ["\(Fixtures.root)/Scripts/moto-server.py"] + buckets.flatMap { ["--bucket", $0] })
        let info = try ServerInfo.read(helper, "moto did not start")
        endpoint = info.endpoint
        port = info.port
        accessKeyID = info.access_key_id
        secretAccessKey = info.secret_access_key
    }

    /// One server for the whole test process (it starts in 2-10 s): each test
    /// makes its own bucket. It stops when this process ends (its stdin closes).
    static let shared: Result<Moto, SnapError> = {
        do { return .success(try Moto(buckets: [])) } catch { return .failure(error as? SnapError ?? SnapError(.internal, "\(error)")) }
    }()

    /// The shared server with a new, empty bucket.
    public static func withBucket() throws -> (Moto, String) {
        let moto = try shared.get()
        return (moto, try moto.newBucket())
    }
}

/// Scripts/fault-proxy.py in front of a port.
public final class FaultProxy: @unchecked Sendable {  // set up in init, then only read
    let helper: ServerProcess
    public let endpoint: String
    let statsPath: String

    /// `misbehaviour`: more of fault-proxy.py's options (`--accept-overwrites`, `--empty-get TEXT`, …).
    public init(upstreamPort: Int, latencyMs: Double = 0, slowdown: Double = 0, drop: Double = 0, seed: Int = 1, faultMethods: String? = nil,
                misbehaviour: [String] = []) throws {
        statsPath = NSTemporaryDirectory() + "snapthumb-proxy-\(UUID().uuidString).json"
        helper = try ServerProcess(Moto.python, ["\(Fixtures.root)/Scripts/fault-proxy.py", "--upstream", "127.0.0.1:\(upstreamPort)",
                             "--latency-ms", "\(latencyMs)", "--slowdown", "\(slowdown)", "--drop", "\(drop)",
                             "--seed", "\(seed)", "--stats", statsPath] + (faultMethods.map { ["--fault-methods", $0] } ?? []) + misbehaviour)
        guard helper.firstLine.hasPrefix("port "), let port = Int(helper.firstLine.dropFirst(5)) else {
            helper.stop()
            throw SnapError(.internal, "the fault proxy did not start: \(helper.firstLine)")
        }
        endpoint = "http://127.0.0.1:\(port)"
    }

    deinit {
        helper.stop()
        try? FileManager.default.removeItem(atPath: statsPath)
    }

    public struct Stats: Decodable, Sendable {
        public let requests: Int
        public let methods: [String: Int]
        public let slowdowns: Int
        public let drops: Int
        public let expect_continue: Int
        public let forwarded: Int
        /// Successful PUTs by path.
        public let puts_ok: [String: Int]
        /// Every PUT by path, whatever its answer.
        public var puts: [String: Int] = [:]
        /// Requests by User-Agent.
        public var user_agents: [String: Int] = [:]
        public var overwrites_accepted = 0
        public var if_match_refused = 0
        public var emptied = 0
        public var garbled = 0

        public var putCount: Int { puts.values.reduce(0, +) }
    }

    public var stats: Stats {
        (try? JSONDecoder().decode(Stats.self, from: Data(contentsOf: URL(fileURLWithPath: statsPath))))
            ?? Stats(requests: 0, methods: [:], slowdowns: 0, drops: 0, expect_continue: 0, forwarded: 0, puts_ok: [:])
    }
}
