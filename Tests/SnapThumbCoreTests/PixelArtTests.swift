@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@_spi(Benchmarks) @testable import SnapThumbCore
import VipsKit

@Suite("Pixel art")
struct PixelArtTests {
    static let photo = "snaps/phone-portrait.jpg"

    @Test("pixel100 is pixel25 enlarged ×4 with nearest neighbour, with exactly its colours")
    func sameColours() throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample(Self.photo)))
        let small = try Pixels(encoded: Fixtures.blob(upload, "pixel25"))
        let large = try Pixels(encoded: Fixtures.blob(upload, "pixel100"))
        #expect(small.width == 25 && small.height == 25)
        #expect(large.width == 100 && large.height == 100)
        #expect(small.colours == large.colours)
        #expect(small.colours.count <= 16 && small.colours.count > 4)
        #expect(upload.manifest.variants["pixel25"]!.colours == small.colours.count)
        for y in 0..<100 { for x in 0..<100 { #expect(large.pixel(x, y) == small.pixel(x / 4, y / 4)) } }
    }

    /// soft is the block mean quantised; drawn lifts contrast and chroma on purpose, so it may
    /// stray further in RGB (its faithfulness in OKLab is PixelStyleTests' drift).
    @Test("the grid follows the photo: it resembles square100 shrunk to 25×25",
          arguments: [(Settings.PixelStyle.soft, 14.0), (.drawn, 22), (.retro, 40)])
    func resemblesPhoto(style: Settings.PixelStyle, limit: Double) throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample(Self.photo))) { $0.pixel.style = style }
        let grid = try Pixels(encoded: Fixtures.blob(upload, "pixel25"))
        let square = try VImage.load(SourceBuffer(Fixtures.blob(upload, "square100")), options: "").shrunk(4, 4)
        let difference = try grid.meanDifference(Pixels(image: square))
        #expect(difference < limit, "mean difference \(difference)")
    }

    @Test("fixed palettes: every colour comes from the palette", arguments: ["pico8", "gameboy", "#102030,#F0E0D0,#FF0000"])
    func fixedPalette(name: String) throws {
        let choice = try PaletteChoice(parsing: name)
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample(Self.photo))) { $0.pixel.palette = choice }
        let allowed = Set(choice.fixedColours!.map { [$0.red, $0.green, $0.blue] })
        let pixels = try Pixels(encoded: Fixtures.blob(upload, "pixel100"))
        #expect(pixels.colours.isSubset(of: allowed), "\(pixels.colours.subtracting(allowed))")
        #expect(upload.manifest.variants["pixel100"]!.palette == choice.label)
    }

    @Test("colour count and dithering are honoured", arguments: [2, 4, 8, 32, 256])
    func colourCount(n: Int) throws {
        for dither in [false, true] {
            let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample(Self.photo))) { $0.pixel.colours = n; $0.pixel.dither = dither }
            let pixels = try Pixels(encoded: Fixtures.blob(upload, "pixel25"))
            #expect(pixels.colours.count <= n)
            #expect(upload.manifest.variants["pixel25"]!.dither == dither)
        }
    }

    @Test("dithering changes the result")
    func ditherMatters() throws {
        let bytes = try Fixtures.bytes(Fixtures.sample(Self.photo))
        let plain = try Fixtures.process(bytes) { $0.pixel.colours = 4 }
        let dithered = try Fixtures.process(bytes) { $0.pixel.colours = 4; $0.pixel.dither = true }
        #expect(Fixtures.blob(plain, "pixel25") != Fixtures.blob(dithered, "pixel25"))
    }

    @Test("the PNG writer round-trips every bit depth exactly", arguments: [2, 3, 4, 16, 17, 256])
    func pngRoundTrip(count: Int) throws {
        let palette: [Colour] = (0..<count).map { (i: Int) -> Colour in
            let red = UInt8(i * 7 % 256), green = UInt8(i * 13 % 256), blue = UInt8(255 - i)
            return Colour(red: red, green: green, blue: blue)
        }
        let width = 13, height = 7
        let indices = (0..<width * height).map { UInt8(($0 * 5 + $0 / 3) % count) }
        let image = IndexedImage(width: width, height: height, palette: palette, indices: indices)
        for effort in [PalettePNG.Effort.normal, .max] {
            let png = try PalettePNG.encode(image, effort: effort)
            let decoded = try Pixels(encoded: png)
            #expect(decoded.width == width && decoded.height == height)
            for i in 0..<width * height {
                let c = palette[Int(indices[i])]
                #expect(decoded.pixel(i % width, i / width).prefix(3) == [Int(c.red), Int(c.green), Int(c.blue)])
            }
        }
    }

    @Test("colour ladder")
    func ladder() {
        #expect(PixelArtStep.colourLadder(from: 16) == [16, 12, 9, 6, 4, 3, 2])
        #expect(PixelArtStep.colourLadder(from: 2) == [2])
    }
}

@Suite("Square crop")
struct CropTests {
    /// A wide image with its only detail (a bright, busy block) at the right-hand edge.
    static func offCentre() throws -> [UInt8] {
        let width = 600, height = 200
        var rgb = [UInt8](repeating: 40, count: width * height * 3)
        for y in 0..<height {
            for x in 480..<width {
                let i = (y * width + x) * 3
                let on = (x / 6 + y / 6) % 2 == 0
                rgb[i] = on ? 250 : 200; rgb[i + 1] = on ? 40 : 220; rgb[i + 2] = on ? 60 : 30
            }
        }
        return try VImage.fromRGB(rgb, width: width, height: height).jpeg(quality: 92)
    }

    @Test("centre keeps the middle; attention follows the detail; both are exactly the square size")
    func attention() throws {
        let bytes = try Self.offCentre()
        let centre = try Pixels(encoded: Fixtures.blob(Fixtures.process(bytes), "square100"))
        let attention = try Pixels(encoded: Fixtures.blob(Fixtures.process(bytes) { $0.square.crop = .attention }, "square100"))
        #expect(centre.width == 100 && centre.height == 100)
        #expect(attention.width == 100 && attention.height == 100)
        // The middle of the image is flat grey; the detail is far to the right.
        #expect(centre.means.allSatisfy { abs($0 - 40) < 6 }, "centre \(centre.means)")
        #expect(attention.means[0] > 120, "attention \(attention.means)")
    }
}

@Suite("Pixel-art PNG size")
struct PalettePNGSizeTests {
    @Test("each PNG uses the filter plan and zlib strategy that make its kind smallest on sample photos")
    func chosenPlansAreSmaller() throws {
        let settings = Settings()
        _ = try Pipeline(settings: settings)
        var chosen = (grid: 0, large: 0), previous = (grid: 0, large: 0)
        for file in ["snaps/phone-portrait.jpg", "snaps/display-p3.jpg", "snaps/landscape.webp", "snaps/iphone.heic", "snaps/gps-tagged.jpg"] {
            var snap = Snap(source: SourceBuffer(try Fixtures.bytes(Fixtures.sample(file))), settings: settings)
            try Pipeline.run(BenchmarkSupport.stage(through: "square"), on: &snap)
            let rgb = boxShrink(rgb: snap.square, side: 100, factor: 4)
            let image = try Quantizer.indexed(rgb: rgb, width: 25, height: 25, colours: 16, fixed: nil, dither: false)
            let large = image.scaled(by: 4)
            chosen.grid += try PalettePNG.encode(image).count
            chosen.large += try PalettePNG.encode(large, enlarged: true).count
            // The single plan used before: adaptive filters, zlib's default strategy.
            previous.grid += try PalettePNG.encode(image, plans: [.adaptive], strategies: [.default], level: 8).count
            previous.large += try PalettePNG.encode(large, plans: [.adaptive], strategies: [.default], level: 8).count
        }
        #expect(chosen.grid < previous.grid, "pixel25 \(chosen.grid) B against \(previous.grid) B")
        #expect(chosen.large < previous.large, "pixel100 \(chosen.large) B against \(previous.large) B")
    }
}
