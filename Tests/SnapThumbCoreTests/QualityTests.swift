@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
import SnapThumbStore
@_spi(Benchmarks) @testable import SnapThumbCore
import VipsKit

@Suite("Quality per byte")
struct QualityTests {
    /// The working image's short side.
    static func decodedShortSide(_ bytes: [UInt8], need: Int = 100) throws -> Int {
        let settings = Settings()
        let (_, image) = try DecodeStep.run(SourceBuffer(bytes), settings: settings, need: need)
        switch image {
        case .rgb(let packed): return min(packed.region.width, packed.region.height)
        case .vips(let image): return min(image.width, image.height)
        }
    }

    @Test("a 1080×1440 JPEG is decoded with at least 200 px on its short side for a 100 px square")
    func jpegShrinkKeepsTwice() throws {
        let jpeg = try Fixtures.syntheticJPEG(width: 1080, height: 1440)
        let short = try Self.decodedShortSide(jpeg)
        #expect(short >= 200, "decoded short side \(short)")
        #expect(short <= 540, "decoded short side \(short): shrink-on-load should still scale down")
        #expect(DecodeStep.jpegShrink(short: 1080, need: 100) == 4)
        #expect(DecodeStep.jpegShrink(short: 3024, need: 100) == 8)
        #expect(DecodeStep.jpegShrink(short: 399, need: 100) == 1)
    }

    @Test("every input path keeps at least twice the square's side when the input has it")
    func everyFormatKeepsTwice() throws {
        _ = try Pipeline()
        var checked = 0
        for folder in ["snaps", "orientation"] {
            for entry in try FileWalker.regularFiles(under: Fixtures.sample(folder)).files {
                let bytes = try Fixtures.bytes(entry.path)
                guard let upload = try? Fixtures.process(bytes) else { continue }
                let info = upload.manifest.source
                guard min(info.width, info.height) >= 200 else { continue }
                #expect(try Self.decodedShortSide(bytes) >= 200, "\(entry.relativePath) (\(info.mediaType))")
                checked += 1
            }
        }
        #expect(checked >= 10)
    }

    /// The sampling factors of each component in a JPEG's SOF0 segment.
    static func samplingFactors(_ jpeg: [UInt8]) -> [UInt8] {
        var i = 2
        while i + 4 < jpeg.count {
            let marker = jpeg[i + 1], length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if marker == 0xC0 {
                let components = Int(jpeg[i + 9])
                return (0..<components).map { jpeg[i + 11 + $0 * 3] }
            }
            i += 2 + length
        }
        return []
    }

    @Test("square100 is baseline 4:4:4 with optimised Huffman tables by default; --chroma 420 halves chroma")
    func chroma() throws {
        let photo = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let full = Fixtures.blob(try Fixtures.process(photo), "square100")
        #expect(Self.samplingFactors(full) == [0x11, 0x11, 0x11])
        #expect(jpegMarkers(full).contains(0xC0) && !jpegMarkers(full).contains(0xC2))
        let halved = Fixtures.blob(try Fixtures.process(photo) { $0.square.chroma = .c420 }, "square100")
        #expect(Self.samplingFactors(halved) == [0x22, 0x11, 0x11])
        // Optimised Huffman: one DC and one AC table, listing only the symbols this
        // square uses (the standard AC table lists all 162).
        let tables = JPEGPlanTests.huffmanTables(full)
        #expect(tables.count == 2 && tables.map(\.id) == [0x00, 0x10])
        #expect(tables[1].symbols < 162 && tables[0].symbols < 12)
    }

    @Test("chroma is a config field and part of the recipe digest; the pipeline version is 13")
    func chromaSetting() throws {
        let settings = try JSONDecoder().decode(Settings.self, from: Data(#"{"square": {"chroma": "420"}}"#.utf8))
        #expect(settings.square.chroma == .c420)
        #expect(Settings().square.chroma == .c444)
        #expect(Settings().square.qualityMax == 100)
        #expect(throws: SnapError.self) { try JSONDecoder().decode(Settings.self, from: Data(#"{"square": {"chroma": "422"}}"#.utf8)) }
        let base = try Fixtures.pipeline().recipe
        #expect(try Fixtures.pipeline { $0.square.chroma = .c420 }.recipe.digest != base.digest)
        #expect(base.version == 13)
    }

    @Test("square100 is deterministic")
    func deterministic() throws {
        let photo = try Fixtures.bytes(Fixtures.sample("snaps/display-p3.jpg"))
        let a = try Fixtures.process(photo), b = try Fixtures.process(photo)
        #expect(Fixtures.blob(a, "square100") == Fixtures.blob(b, "square100"))
        #expect(a.manifest.variants == b.manifest.variants)
    }
}
