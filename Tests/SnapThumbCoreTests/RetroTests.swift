import Testing
@_spi(Testing) import SnapThumbTesting
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

    @Test("a smooth gradient is dithered; a flat field, a hard edge and a low-contrast texture are not")
    func gradientsOnly() {
        let width = 12
        let ramp = (0..<width).map { OKLab(l: 0.4 + 0.03 * Double($0), a: 0, b: 0) }
        #expect(OKLabQuantizer.gradientCells(ramp, width: width).dropFirst().dropLast().allSatisfy { $0 })
        let flat = [OKLab](repeating: OKLab(l: 0.5, a: 0, b: 0), count: width)
        #expect(OKLabQuantizer.gradientCells(flat, width: width).allSatisfy { !$0 })
        let edge = (0..<width).map { OKLab(l: $0 < 6 ? 0.2 : 0.9, a: 0, b: 0) }
        #expect(!OKLabQuantizer.gradientCells(edge, width: width)[5] && !OKLabQuantizer.gradientCells(edge, width: width)[6])
        // Steps as small as the ramp's, but up and down: a texture, not a gradient (issue 38: retro
        // dithered grass and knits into noise).
        let texture = (0..<width).map { OKLab(l: 0.5 + ($0 % 2 == 0 ? 0 : 0.03) + 0.002 * Double($0), a: 0, b: 0) }
        #expect(OKLabQuantizer.gradientCells(texture, width: width).dropFirst().dropLast().allSatisfy { !$0 })
        // A ramp in two dimensions (a dusk sky, darker to one corner) is still a gradient.
        let sky = (0..<(width * width)).map { OKLab(l: 0.3 + 0.02 * Double($0 % width) + 0.015 * Double($0 / width), a: 0, b: 0) }
        let skyCells = OKLabQuantizer.gradientCells(sky, width: width)
        #expect((1..<(width - 1)).allSatisfy { y in (1..<(width - 1)).allSatisfy { x in skyCells[y * width + x] } })
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

    @Test("retro keeps a small subject that stands apart (a kite in the sky), and a dither's stray still goes",
          arguments: [[250, 220, 40], [230, 30, 40]] as [[UInt8]])
    func retroKite(kite: [UInt8]) throws {
        // A 25×25 sky in smooth blues with one cell of kite.
        var rgb: [UInt8] = []
        for y in 0..<25 { for _ in 0..<25 { rgb += [UInt8(60 + y * 2), UInt8(120 + y * 2), 230] } }
        rgb.replaceSubrange((12 * 25 + 12) * 3..<(12 * 25 + 13) * 3, with: kite)
        var settings = Settings.PixelSettings()
        settings.style = .retro
        let art = try PixelArtStep.run(rgb: rgb, grid: 25, settings: settings, mode: .bytes)
        let pixels = try Pixels(encoded: art.grid.bytes)
        func colour(_ x: Int, _ y: Int) -> OKLab {
            let p = pixels.pixel(x, y)
            return OKLab(red: UInt8(p[0]), green: UInt8(p[1]), blue: UInt8(p[2]))
        }
        let kiteColour = OKLab(red: kite[0], green: kite[1], blue: kite[2])
        #expect(colour(12, 12).distance(kiteColour) < colour(11, 12).distance(kiteColour),
                "the kite became \(pixels.pixel(12, 12)), the sky is \(pixels.pixel(11, 12))")
        #expect(colour(12, 12).distance(colour(11, 12)) > 0.15)
        // A lone cell one palette step from its neighbours (what the dither leaves) still goes.
        let grey: [UInt8] = [0x80, 0x80, 0x80], stray: [UInt8] = [0x9A, 0x9A, 0x98]
        var flat = Array((0..<(25 * 25)).flatMap { _ in grey })
        flat.replaceSubrange((12 * 25 + 12) * 3..<(12 * 25 + 13) * 3, with: stray)
        let lab = OKLab.image(rgb: flat)
        #expect(!OKLabQuantizer.salientCells(lab, width: 25).contains(true))
    }

    @Test("a palette colour is as vivid as the colours it stands for: hue and lightness of the mean, their chroma")
    func vividCentres() {
        // Two colours of one lightness and chroma, 90° apart in hue: their mean is greyer.
        let points = [OKLab(l: 0.6, a: 0.1, b: 0), OKLab(l: 0.6, a: 0, b: 0.1)]
        let mean = OKLab(l: 0.6, a: 0.05, b: 0.05)
        let vivid = OKLabQuantizer.vivid([mean], points)[0]
        #expect(abs(vivid.chroma - 0.1) < 1e-9, "\(vivid)")
        #expect(abs(vivid.l - 0.6) < 1e-12 && abs(vivid.a - vivid.b) < 1e-12)
        // A centre no point is nearest keeps its colour; a grey centre stays grey.
        let far = OKLab(l: 0.1, a: 0, b: 0)
        #expect(OKLabQuantizer.vivid([mean, far], points)[1] == far)
    }

    @Test("retro gives a face's skin tone PICO-8's nearest skin colour, never a grey or lavender; a grey face keeps the grey ramp",
          arguments: [[0x9A, 0x80, 0x70], [0x6E, 0x5A, 0x50], [0xE0, 0xAC, 0x90], [0x8A, 0x6A, 0x60]] as [[UInt8]])
    func retroSkin(tone: [UInt8]) {
        // A face of one shaded skin tone in a grey room.
        let wall: [UInt8] = [0x70, 0x70, 0x72]
        var rgb: [UInt8] = []
        for y in 0..<25 {
            for x in 0..<25 { rgb += (8..<16).contains(x) && (8..<16).contains(y) ? tone : wall }
        }
        let skin = Colour(red: tone[0], green: tone[1], blue: tone[2])
        let image = OKLabQuantizer.indexed(rgb: rgb, width: 25, height: 25, colours: 16, fixed: Self.pico8, ordered: true, reserved: [skin])
        let face = image.palette[Int(image.indices[12 * 25 + 12])]
        let named: [Colour: String] = [Colour(red: 0xAB, green: 0x52, blue: 0x36): "brown", Colour(red: 0xFF, green: 0xA3, blue: 0x00): "orange",
                                       Colour(red: 0xFF, green: 0xCC, blue: 0xAA): "peach"]
        #expect(named[face] != nil, "\(tone) became \(face)")
        // Without the face the same tone may go elsewhere; a grey tone has no skin entry.
        #expect(OKLabQuantizer.skinEntry(OKLab(red: 0x80, green: 0x80, blue: 0x80), Self.pico8.map(OKLab.init)) == nil)
    }
}
