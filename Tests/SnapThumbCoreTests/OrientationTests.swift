@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit

@Suite("EXIF orientation")
struct OrientationTests {
    /// square100 of the upright reference, and its size after decoding.
    static func reference() throws -> Pixels {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("orientation/upright.png")), key: "upright.png")
        return try Pixels(encoded: Fixtures.blob(upload, "square100"))
    }

    @Test("every orientation comes out upright, applied exactly once", arguments: 1...8)
    func upright(orientation: Int) throws {
        let reference = try Self.reference()
        let path = Fixtures.sample("orientation/orientation-\(orientation).jpg")
        let upload = try Fixtures.process(Fixtures.bytes(path), key: "o\(orientation).jpg")
        let output = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        #expect(upload.manifest.source.orientation == orientation)
        // Displayed size: the reference is 600×400 landscape whatever the stored layout.
        #expect(upload.manifest.source.width == 600)
        #expect(upload.manifest.source.height == 400)
        let difference = output.meanDifference(reference)
        #expect(difference < 6, "orientation \(orientation): mean difference \(difference) from upright")

        // The comparison can tell orientations apart: the upright square differs
        // clearly from its own mirror image.
        let mirrored = try VImage.load(SourceBuffer(Fixtures.blob(upload, "square100")), options: "").flippedHorizontally()
        #expect(try Pixels(image: mirrored).meanDifference(reference) > 20)
    }

    @Test("packed-RGB orientation gives libvips' rot + flip pixels exactly", arguments: 1...8)
    func packedMatchesLibvips(orientation: Int) throws {
        // An odd, non-square size catches swapped axes and off-by-one edges.
        let width = 7, height = 4
        let rgb = (0..<width * height * 3).map { UInt8(($0 * 37 + 5) % 251) }
        let fix = OrientationFix(exif: orientation)
        let packed = Resample.oriented(rgb: rgb, width: width, height: height, rotate: fix.rotate, flip: fix.flip)
        let vips = try fix.apply(to: VImage.fromRGB(rgb, width: width, height: height))
        #expect(packed.width == vips.width && packed.height == vips.height)
        #expect(packed.pixels == (try vips.pixels()))
        #expect((packed.pixels == rgb) == (orientation == 1), "only orientation 1 leaves the pixels as they are")
    }

    @Test("orientation values map to the right fix")
    func table() {
        #expect(OrientationFix(exif: 1) == OrientationFix(exif: 0))
        #expect(OrientationFix(exif: 9) == OrientationFix(exif: 1))
        #expect(OrientationFix(exif: 6).rotate == 90)
        #expect(OrientationFix(exif: 8).rotate == 270)
        #expect(OrientationFix(exif: 3).rotate == 180 && !OrientationFix(exif: 3).flip)
        #expect(OrientationFix(exif: 2).flip && OrientationFix(exif: 2).rotate == 0)
        #expect([5, 6, 7, 8].allSatisfy { OrientationFix(exif: $0).swapsAxes })
        #expect(normalisedOrientation(0) == 1 && normalisedOrientation(-3) == 1 && normalisedOrientation(65535) == 1)
    }

    @Test("nonsense or unreadable EXIF never fails a decodable image")
    func badExif() throws {
        let jpeg = try Fixtures.syntheticJPEG()
        let plain = try Fixtures.process(jpeg)

        let nine = try Fixtures.process(insertingEXIF(jpeg, payload: exifOrientation(9)))
        #expect(nine.manifest.source.orientation == 1)
        #expect(Fixtures.blob(nine, "square100") == Fixtures.blob(plain, "square100"))

        let garbage = (0..<200).map { UInt8(($0 * 73 + 11) % 256) }
        let junk = try Fixtures.process(insertingEXIF(jpeg, payload: garbage))
        #expect(junk.manifest.source.orientation == 1)

        // A valid tag is read: orientation 6 swaps the displayed axes.
        let six = try Fixtures.process(insertingEXIF(jpeg, payload: exifOrientation(6)))
        #expect(six.manifest.source.orientation == 6)
        #expect(six.manifest.source.width == 240 && six.manifest.source.height == 320)
    }
}
