import Foundation
@_exported import PixelKit

/// Colours are written `#RRGGBB` in settings and config files; a malformed one is a `config` error.
extension Colour: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let colour = Colour(hex: text) else {
            throw SnapError(.config, "\"\(text)\" is not a colour; write it as #RRGGBB, e.g. #0A0A1A")
        }
        self.init(red: colour.red, green: colour.green, blue: colour.blue)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}

/// Where the pixel-art palette comes from.
public enum PaletteChoice: Sendable, Equatable, Codable, CustomStringConvertible {
    /// Chosen per image by libimagequant.
    case adaptive
    /// A built-in palette by name (see `PaletteChoice.named`).
    case named(String)
    /// Colours given by the user.
    case custom([Colour])

    /// Built-in palettes.
    public static let builtIn: [String: [Colour]] = [
        // PICO-8's 16 colours.
        "pico8": ["#000000", "#1D2B53", "#7E2553", "#008751", "#AB5236", "#5F574F", "#C2C3C7", "#FFF1E8",
                  "#FF004D", "#FFA300", "#FFEC27", "#00E436", "#29ADFF", "#83769C", "#FF77A8", "#FFCCAA"].compactMap(Colour.init(hex:)),
        // The original Game Boy's four greens.
        "gameboy": ["#0F380F", "#306230", "#8BAC0F", "#9BBC0F"].compactMap(Colour.init(hex:)),
        // Black and white.
        "mono": ["#000000", "#FFFFFF"].compactMap(Colour.init(hex:)),
    ]

    /// Parses `adaptive`, a built-in name, or a comma-separated list of `#RRGGBB` colours.
    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.lowercased() == "adaptive" {
            self = .adaptive
        } else if PaletteChoice.builtIn[trimmed.lowercased()] != nil {
            self = .named(trimmed.lowercased())
        } else if trimmed.contains("#") || trimmed.contains(",") {
            var colours: [Colour] = []
            for part in trimmed.split(separator: ",") {
                guard let colour = Colour(hex: String(part)) else {
                    throw SnapError(.config, "palette colour \"\(part)\" is not #RRGGBB")
                }
                colours.append(colour)
            }
            self = .custom(colours)
        } else {
            let names = (["adaptive"] + PaletteChoice.builtIn.keys.sorted()).joined(separator: ", ")
            throw SnapError(.config, "unknown palette \"\(text)\"; use one of \(names), or a list like #000000,#FFFFFF")
        }
    }

    /// The fixed colours, or nil for `adaptive`.
    public var fixedColours: [Colour]? {
        switch self {
        case .adaptive: return nil
        case .named(let name): return PaletteChoice.builtIn[name]
        case .custom(let colours): return colours
        }
    }

    /// `adaptive`, the built-in name, or `custom`.
    public var label: String {
        switch self {
        case .adaptive: return "adaptive"
        case .named(let name): return name
        case .custom: return "custom"
        }
    }

    public var description: String {
        switch self {
        case .custom(let colours): return colours.map(\.description).joined(separator: ",")
        default: return label
        }
    }

    public init(from decoder: any Decoder) throws {
        try self.init(parsing: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }
}
