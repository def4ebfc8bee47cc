import SystemKit
internal import CVipsShim
import Foundation

/// EXIF reading through libexif.
public enum Exif {
    /// The IFD0 orientation tag of an EXIF blob, or 0 when it is absent or the
    /// blob cannot be read. Never throws: bad EXIF must not fail an image.
    public static func orientation(_ blob: [UInt8]) -> Int {
        blob.withUnsafeBytes { Int(snap_exif_orientation($0.baseAddress, $0.count)) }
    }
}
