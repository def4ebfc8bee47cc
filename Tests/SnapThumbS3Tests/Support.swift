@testable import SystemKit
@testable import SnapThumbConfig
import VipsKit

/// SHA-256 in hex (VipsKit's, named apart from anything Foundation may declare).
enum VipsKitSHA {
    static func hex(_ bytes: [UInt8]) -> String { SHA256.hex(bytes) }
}
