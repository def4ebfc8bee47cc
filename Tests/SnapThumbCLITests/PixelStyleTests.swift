@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@_spi(Benchmarks) @testable import SnapThumbCore
import SnapThumbBench
import VipsKit

/// Issue 29: the default pixel art reads as drawn, measured against the plain box average of
/// the same square in OKLab, on every photo-like sample (docs/pixel-art.md).
@Suite("Pixel-art styles")
struct PixelStyleTests {
    /// The photo-like samples (every format and colour space; not the tiny, grey or alpha ones).
    static let photos = ["snaps/phone-portrait.jpg", "snaps/phone-rotated.jpg", "snaps/gps-tagged.jpg", "snaps/display-p3.jpg",
                         "snaps/adobe-rgb.jpg", "snaps/cmyk-profile.jpg", "snaps/landscape.webp", "snaps/iphone.heic"]

    /// Each photo's pixel25 in `style`, measured against the box average of its own square100 pixels.
    static func measures(_ style: Settings.PixelStyle) throws -> [PixelArtMeasures] {
        var settings = Settings()
        settings.pixel.style = style
        _ = try Pipeline(settings: settings)
        return try photos.map { photo in
            let bytes = try Fixtures.bytes(Fixtures.sample(photo))
            var snap = Snap(source: SourceBuffer(bytes), settings: settings)
            try Pipeline.run(BenchmarkSupport.stage(through: "square"), on: &snap)
            let average = PixelArtMeasures.boxAverage(rgb: snap.square, side: 100, cells: 25)
            let grid = try Pixels(encoded: Fixtures.blob(Fixtures.process(bytes) { $0.pixel.style = style }, "pixel25"))
            #expect(grid.width == 25 && grid.bands == 3)
            return PixelArtMeasures(grid: grid.data, average: average, side: 25)
        }
    }

    @Test("drawn (the default) meets issue 29's targets on the sample photos")
    func drawnMeetsTargets() throws {
        #expect(Settings().pixel.style == .drawn)
        let drawn = PixelArtMeasures.mean(try Self.measures(.drawn))
        let t = PixelArtMeasures.targets
        #expect(drawn.chroma >= t.chroma, "chroma \(drawn.chroma)×")
        #expect(drawn.spread >= t.spread, "lightness spread \(drawn.spread)×")
        #expect(drawn.contrast >= t.contrast, "neighbour contrast \(drawn.contrast)×")
        #expect(drawn.colours >= t.colours, "colours \(drawn.colours)")
        #expect(drawn.drift <= t.drift, "drift \(drawn.drift)")
        print("drawn: \(drawn)")
    }

    @Test("soft is the box average quantised: no lift (what issue 29 measured before)")
    func softIsTheAverage() throws {
        let soft = PixelArtMeasures.mean(try Self.measures(.soft))
        #expect(abs(soft.chroma - 1) < 0.1 && abs(soft.spread - 1) < 0.05 && soft.contrast < 1.05, "\(soft)")
        print("soft: \(soft)")
    }

    @Test("soft makes exactly version 4's pixel art: block means, libimagequant, redmean")
    func softIsVersionFour() throws {
        let settings = Settings()
        _ = try Pipeline(settings: settings)
        for photo in Self.photos.prefix(3) {
            let bytes = try Fixtures.bytes(Fixtures.sample(photo))
            var snap = Snap(source: SourceBuffer(bytes), settings: settings)
            try Pipeline.run(BenchmarkSupport.stage(through: "square"), on: &snap)
            let image = try Quantizer.indexed(rgb: boxShrink(rgb: snap.square, side: 100, factor: 4), width: 25, height: 25,
                                              colours: 16, fixed: nil, dither: false)
            let upload = try Fixtures.process(bytes) { $0.pixel.style = .soft }
            #expect(Fixtures.blob(upload, "pixel25") == (try PalettePNG.encode(image)))
            #expect(Fixtures.blob(upload, "pixel100") == (try PalettePNG.encode(image.scaled(by: 4), enlarged: true)))
        }
    }

    @Test("every style: deterministic, pixel100 is pixel25 ×4, the style is in the recipe", arguments: Settings.PixelStyle.allCases)
    func styleBasics(style: Settings.PixelStyle) throws {
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let first = try Fixtures.process(bytes) { $0.pixel.style = style }
        let second = try Fixtures.process(bytes) { $0.pixel.style = style }
        #expect(first.blobs == second.blobs)
        let small = try Pixels(encoded: Fixtures.blob(first, "pixel25")), large = try Pixels(encoded: Fixtures.blob(first, "pixel100"))
        for y in 0..<100 { for x in 0..<100 where large.pixel(x, y) != small.pixel(x / 4, y / 4) { Issue.record("(\(x), \(y))"); return } }
        #expect(first.manifest.recipe.settings.pixel.style == style)
        let json = String(decoding: try JSONEncoder().encode(first.manifest.recipe.settings.pixel), as: UTF8.self)
        #expect(json.contains("\"style\":\"\(style.rawValue)\""), "\(json)")
        let other = try Fixtures.process(bytes) { $0.pixel.style = style == .drawn ? .soft : .drawn }
        #expect(other.manifest.recipe.digest != first.manifest.recipe.digest, "a style change re-derives")
    }

    @Test("retro: PICO-8 colours only (unless another fixed palette is set), dithered, said in the manifest")
    func retro() throws {
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let upload = try Fixtures.process(bytes) { $0.pixel.style = .retro }
        let pico = Set(PaletteChoice.builtIn["pico8"]!.map { [Int($0.red), Int($0.green), Int($0.blue)] })
        let pixels = try Pixels(encoded: Fixtures.blob(upload, "pixel25"))
        let used = Set((0..<625).map { pixels.pixel($0 % 25, $0 / 25) })
        #expect(used.isSubset(of: pico) && used.count >= 6, "\(used.count) colours")
        #expect(upload.manifest.variants["pixel25"]!.palette == "pico8")
        #expect(upload.manifest.variants["pixel25"]!.dither == true)
        let gameboy = try Fixtures.process(bytes) { $0.pixel.style = .retro; $0.pixel.palette = .named("gameboy") }
        #expect(gameboy.manifest.variants["pixel100"]!.palette == "gameboy")
    }

    @Test("OKLab mapping: a fixed palette keeps hue (skin to peach, olive to green, tan to brown), not the nearest grey",
          arguments: [("E0AC90", "FFCCAA"), ("6B8E23", "008751"), ("C68863", "AB5236"), ("8D5524", "AB5236")])
    func perceptualMapping(from: String, to: String) {
        let palette = PaletteChoice.builtIn["pico8"]!
        let colour = Colour(hex: from)!
        let index = OKLabQuantizer.indexed(rgb: [colour.red, colour.green, colour.blue], width: 1, height: 1, colours: 16,
                                           fixed: PaletteChoice.builtIn["pico8"], ordered: false)
        #expect(index.palette == [Colour(hex: to)!], "\(from) maps to \(index.palette)")
        // Plain OKLab distance would pick a grey for the muted skin tone: the weighting matters.
        if from == "E0AC90" {
            let target = OKLab(colour)
            let plain = palette.min { target.distance(OKLab($0)) < target.distance(OKLab($1)) }!
            #expect(plain == Colour(hex: "C2C3C7"))
        }
    }

    @Test("OKLab round trip and gamut clipping")
    func okLab() {
        for c in [Colour(red: 0, green: 0, blue: 0), Colour(red: 255, green: 255, blue: 255), Colour(red: 200, green: 30, blue: 90)] {
            #expect(OKLab(c).colour == c)
        }
        #expect(abs(OKLab(red: 255, green: 255, blue: 255).l - 1) < 1e-6)
        let vivid = OKLab(l: 0.6, a: 0.4, b: 0.1)
        #expect(!vivid.inGamut && vivid.clippedToGamut.inGamut && vivid.clippedToGamut.l == 0.6)
    }

    @Test("the style comes from the flag, SNAPTHUMB_PIXEL_STYLE or pixel.style; a wrong name is a usage error")
    func styleConfig() throws {
        let dir = Fixtures.tempDirectory("snapthumb-style")
        defer { Fixtures.remove(dir) }
        let config = "\(dir)/cfg.json"
        try Data(#"{"pipeline": {"pixel": {"style": "retro"}}}"#.utf8).write(to: URL(fileURLWithPath: config))
        func shown(_ args: [String], _ env: [String: String] = [:]) throws -> [String: String]? {
            let run = try CLI.run(["config", "--json"] + args, environment: env)
            #expect(run.status == 0, "\(run.stderr)")
            // config --json writes numbers and booleans as such: read the one entry as strings.
            let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: [String: Any]]
            return object?["pipeline.pixel.style"]?.compactMapValues { $0 as? String }
        }
        #expect(try shown([]) == ["value": "drawn", "source": "default"])
        #expect(try shown(["--config", config]) == ["value": "retro", "source": "pipeline.pixel.style in \(config)"])
        #expect(try shown(["--config", config], ["SNAPTHUMB_PIXEL_STYLE": "soft"]) == ["value": "soft", "source": "SNAPTHUMB_PIXEL_STYLE"])
        #expect(try shown(["--config", config, "--pixel-style", "drawn"], ["SNAPTHUMB_PIXEL_STYLE": "soft"])
                == ["value": "drawn", "source": "--pixel-style"])
        let bad = try CLI.run(["config", "--pixel-style", "muddy"])
        #expect(bad.status == 2 && bad.stderr.contains("drawn, soft, retro"), "\(bad.stderr)")
    }
}

@Suite("OKLab's cube root")
struct CubeRootTests {
    @Test("within 1e-12 of libm's cbrt (relative) from 1e-12 to 1e3, exact at 0, odd")
    func closeToLibm() {
        var x = 1e-12
        var worst = 0.0
        while x < 1e3 {
            let ours = OKLab.cubeRoot(x), libm = cbrt(x)
            worst = max(worst, abs(ours - libm) / libm)
            #expect(OKLab.cubeRoot(-x) == -ours)
            x *= 1.0007
        }
        #expect(worst <= 1e-12, "worst \(worst)")
        #expect(OKLab.cubeRoot(0) == 0 && abs(OKLab.cubeRoot(8) - 2) < 1e-12 && abs(OKLab.cubeRoot(0.125) - 0.5) < 1e-12)
    }
}
