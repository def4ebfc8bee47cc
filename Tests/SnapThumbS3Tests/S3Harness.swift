import Foundation
import SnapThumbTesting

/// Paths of this checkout. The servers (moto, Ceph RGW, the fault proxy) are SnapThumbTesting's.
enum Repo {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    static func sample(_ relative: String) -> String { "\(root)/Samples/\(relative)" }

    /// moto is installed by Scripts/moto.sh (run by setup.sh and test.sh). Without it
    /// these tests are skipped, unless SNAPTHUMB_REQUIRE_MOTO=1 (set by test.sh) makes that a failure.
    static var motoAvailable: Bool { Moto.available }

    /// Ceph's RADOS Gateway, started by Scripts/rgw.sh (test.sh installs it). Without
    /// radosgw these tests are skipped, unless SNAPTHUMB_REQUIRE_RGW=1 (set by test.sh)
    /// makes that a failure.
    static var rgwAvailable: Bool { RGW.available }

    static func tempDirectory(_ name: String = "snapthumb-s3-test") -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
