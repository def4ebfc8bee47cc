import Foundation

/// An opaque sRGB colour, written `#RRGGBB` in settings and config files.
public struct Colour: Sendable, Hashable, CustomStringConvertible {
    public var red: UInt8, green: UInt8, blue: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8) {
        self.red = red; self.green = green; self.blue = blue
    }

    /// Parses `#RRGGBB` or `RRGGBB` (case-insensitive).
    public init?(hex: String) {
        var text = Substring(hex.trimmingCharacters(in: .whitespaces))
        if text.hasPrefix("#") { text = text.dropFirst() }
        guard text.count == 6, text.allSatisfy(\.isHexDigit), let value = UInt32(text, radix: 16) else { return nil }
        self.init(red: UInt8(value >> 16 & 0xFF), green: UInt8(value >> 8 & 0xFF), blue: UInt8(value & 0xFF))
    }

    public var description: String {
        String(format: "#%02X%02X%02X", red, green, blue)
    }
}
