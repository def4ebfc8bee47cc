import Foundation
import SnapThumbTesting

/// Paths of this checkout, and whether the bucket tests' servers are installed (the servers
/// themselves, moto, Ceph RGW and the fault proxy, are SnapThumbTesting's).
enum Repo {
    static var root: String { Fixtures.root }
    static func sample(_ relative: String) -> String { Fixtures.sample(relative) }

    /// moto is installed by Scripts/moto.sh (run by setup.sh and test.sh). Without it
    /// these tests are skipped, unless SNAPTHUMB_REQUIRE_MOTO=1 (set by test.sh) makes that a failure.
    static var motoAvailable: Bool { Moto.available }

    /// Ceph's RADOS Gateway, started by Scripts/rgw.sh (test.sh installs it). Without
    /// radosgw these tests are skipped, unless SNAPTHUMB_REQUIRE_RGW=1 (set by test.sh)
    /// makes that a failure.
    static var rgwAvailable: Bool { RGW.available }

    static func tempDirectory(_ name: String = "snapthumb-s3-test") -> String {
        Fixtures.tempDirectory(name)
    }
}

/// Runs the built `snapthumb` for the bucket and queue tests.
enum CloudCLI {
    typealias Result = CLI.Result

    /// Without the caller's AWS settings: every test names its own endpoint and keys.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        try ChildProcess.run(CLI.binary, arguments, environment: environment, unset: [
            "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
        ])
    }
}
