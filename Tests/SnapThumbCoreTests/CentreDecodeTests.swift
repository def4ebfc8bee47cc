@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@_spi(Benchmarks) @testable import SnapThumbCore
import VipsKit

/// A centre crop decodes only the middle of a JPEG (issue 16 item 4: speed), and
/// its squares are byte for byte those of a whole decode.
@Suite("Centre-only JPEG decode")
struct CentreDecodeTests {
    /// The square made the long way: the whole image decoded, turned upright, resampled.
    static func wholeSquare(_ bytes: [UInt8], side: Int = 100) throws -> [UInt8] {
        let decoder = try JPEGDecoder(SourceBuffer(bytes), failOn: 3)
        let header = ImageHeader(format: .jpeg, width: decoder.width, height: decoder.height, fullDecode: false,
                                 exif: decoder.exif, profile: nil)
        let shrink = DecodeStep.jpegShrink(short: min(decoder.width, decoder.height), need: side)
        let whole = try decoder.decodePixels(shrink: shrink)
        #expect(whole.region == PixelRegion(left: 0, top: 0, width: whole.width, height: whole.height))
        let fix = OrientationFix(exif: header.orientation)
        let upright = Resample.oriented(rgb: whole.pixels, width: whole.width, height: whole.height, rotate: fix.rotate, flip: fix.flip)
        return try Resample.squareCentre(rgb: upright.pixels, width: upright.width, height: upright.height, side: side)
    }

    @Test("with --faces off, portrait and landscape photos, every EXIF orientation: only the centre is decoded, the same square comes out",
          arguments: ["snaps/phone-portrait.jpg", "snaps/phone-rotated.jpg", "snaps/gps-tagged.jpg"]
            + (1...8).map { "orientation/orientation-\($0).jpg" })
    func sameSquare(sample: String) throws {
        let bytes = try Fixtures.bytes(Fixtures.sample(sample))
        var settings = Settings()
        settings.square.faces = false
        let (_, image) = try DecodeStep.run(SourceBuffer(bytes), settings: settings, need: 100)
        guard case .rgb(let packed) = image else { Issue.record("\(sample) did not take the packed path"); return }
        #expect(!packed.isWhole, "\(sample): the whole image was decoded")
        #expect(packed.region.width * packed.region.height < packed.width * packed.height * 9 / 10)
        #expect(try BenchmarkSupport.decodeSquare(bytes, settings: settings) == Self.wholeSquare(bytes))
    }

    @Test("a 4:1:0 JPEG, which libjpeg-turbo 2.1 crops with wrong colours at 1/2 and 1/4, is decoded at full width: the same square as a whole decode")
    func fourOneZeroIsNotCropped() throws {
        // Tests/Fuzz/decoder-known/crop-4x2.jpg: 720×540, luma sampled 4×2 (`cjpeg -sample 4x2`), decoded at 1/2.
        let bytes = try Fixtures.bytes("\(Fixtures.root)/Tests/Fuzz/decoder-known/crop-4x2.jpg")
        var settings = Settings()
        settings.square.faces = false
        let (_, image) = try DecodeStep.run(SourceBuffer(bytes), settings: settings, need: 100)
        guard case .rgb(let packed) = image else { Issue.record("the file did not take the packed path"); return }
        #expect(packed.region.width == packed.width, "no columns cropped")
        #expect(try BenchmarkSupport.decodeSquare(bytes, settings: settings) == Self.wholeSquare(bytes))
    }

    @Test("the region holds the centre square and the resampler's reach at every size the pipeline cuts")
    func regionCoversTheTaps() throws {
        #expect(DecodeStep.centreRegion(width: 270, height: 360, smallestSide: 100) != nil)
        for (width, height) in [(270, 360), (360, 270), (200, 2000), (101, 300), (50, 80), (1000, 1001), (4000, 3000)] {
            for side in [17, 25, 100, 200] {
                let rgb = Fixtures.syntheticRGB(width: width, height: height)
                let expected = try Resample.squareCentre(rgb: rgb, width: width, height: height, side: side)
                guard let region = DecodeStep.centreRegion(width: width, height: height, smallestSide: side) else { continue }
                var part = [UInt8]()
                for y in region.top..<(region.top + region.height) {
                    let start = (y * width + region.left) * 3
                    part += rgb[start..<(start + region.width * 3)]
                }
                let square = try Resample.squareCentre(rgb: part, region: region, fullWidth: width, fullHeight: height, side: side)
                #expect(square == expected, "\(width)×\(height) at \(side)")
            }
        }
    }

    @Test("a JPEG damaged only below the centre still fails (its rows are read, not decoded)",
          arguments: ["snaps/phone-portrait.jpg", "snaps/phone-rotated.jpg"])
    func damageBelowTheCentreIsFound(sample: String) throws {
        let bytes = try Fixtures.bytes(Fixtures.sample(sample))
        for share in [95, 90, 80] {
            let truncated = Array(bytes.prefix(bytes.count * share / 100))
            do {
                _ = try Fixtures.process(truncated)
                Issue.record("\(sample) cut at \(share) % was accepted")
            } catch let error as SnapError {
                #expect(error.code == .corrupt, "\(sample) at \(share) %: \(error)")
            }
        }
    }
}
