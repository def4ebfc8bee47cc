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

    /// `#RRGGBB`, upper-case. Written out by hand: Foundation's `String(format:)` sets up its
    /// locale machinery on first use (about half a millisecond of every worker's start-up,
    /// where the recipe is encoded).
    public var description: String {
        let digits = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = [UInt8(ascii: "#")]
        for value in [red, green, blue] { bytes += [digits[Int(value >> 4)], digits[Int(value & 0xF)]] }
        return String(decoding: bytes, as: UTF8.self)
    }
}
