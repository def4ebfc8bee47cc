import Testing
@testable import SnapThumbCore
import VipsKit

/// retro after issue 38: greys by lightness, dither only where a gradient would band, and a
/// palette slot for the most salient outlier in the adaptive palettes.
@Suite("Retro and the palette's reserved slots")
struct RetroTests {
    static let pico8 = PaletteChoice.named("pico8").fixedColours!

    static func flat(_ colour: [UInt8], side: Int = 8) -> [UInt8] { Array((0..<(side * side)).flatMap { _ in colour }) }

    @Test("a flat grey maps to one of PICO-8's greys by lightness, never navy or lavender, and is not dithered",
          arguments: [[0x80, 0x80, 0x80], [0x9A, 0x9A, 0x98], [0x40, 0x40, 0x42], [0xB0, 0xAE, 0xAA]] as [[UInt8]])
    func greys(colour: [UInt8]) {
        let image = OKLabQuantizer.indexed(rgb: Self.flat(colour), width: 8, height: 8, colours: 16, fixed: Self.pico8, ordered: true)
        #expect(image.palette.count == 1, "a flat area is one colour, no checkerboard: \(image.palette)")
        let grey = image.palette[0]
        #expect(OKLab(grey).chroma < OKLabQuantizer.greyChroma, "\(colour) → \(grey)")
    }

    @Test("a smooth gradient is dithered, a flat field and a hard edge are not")
    func gradientsOnly() {
        let width = 12
        let ramp = (0..<width).map { OKLab(l: 0.4 + 0.03 * Double($0), a: 0, b: 0) }
        #expect(OKLabQuantizer.gradientCells(ramp, width: width).dropFirst().dropLast().allSatisfy { $0 })
        let flat = [OKLab](repeating: OKLab(l: 0.5, a: 0, b: 0), count: width)
        #expect(OKLabQuantizer.gradientCells(flat, width: width).allSatisfy { !$0 })
        let edge = (0..<width).map { OKLab(l: $0 < 6 ? 0.2 : 0.9, a: 0, b: 0) }
        #expect(!OKLabQuantizer.gradientCells(edge, width: width)[5] && !OKLabQuantizer.gradientCells(edge, width: width)[6])
    }

    @Test("a small bright subject keeps a colour of its own in the adaptive palette (a kite in the sky)")
    func salientOutlier() {
        // A 25×25 sky in smooth blues with one red cell.
        var rgb: [UInt8] = []
        for y in 0..<25 { for x in 0..<25 { rgb += [UInt8(60 + y * 3), UInt8(120 + y * 2 + x), 230] } }
        rgb.replaceSubrange((12 * 25 + 12) * 3..<(12 * 25 + 13) * 3, with: [230, 30, 40])
        let image = OKLabQuantizer.indexed(rgb: rgb, width: 25, height: 25, colours: 16, fixed: nil, ordered: false)
        let kite = image.palette[Int(image.indices[12 * 25 + 12])]
        #expect(OKLab(kite).distance(OKLab(red: 230, green: 30, blue: 40)) < 0.05, "the kite became \(kite)")
    }

    @Test("a reserved colour (a face's skin) is in the palette")
    func reservedSkin() {
        var rgb: [UInt8] = []
        for i in 0..<(25 * 25) { rgb += [UInt8(i % 200), UInt8((i * 7) % 250), UInt8((i * 13) % 250)] }
        let skin = Colour(red: 224, green: 172, blue: 144)
        rgb.replaceSubrange(0..<3, with: [224, 172, 144])
        let image = OKLabQuantizer.indexed(rgb: rgb, width: 25, height: 25, colours: 16, fixed: nil, ordered: false, reserved: [skin])
        #expect(image.palette.contains(skin))
    }
}
