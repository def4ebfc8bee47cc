@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit
import PixelKit

@Suite("Colour: sRGB, bit depth, alpha, privacy")
struct ColourTests {
    @Test("a colour is written #RRGGBB in upper case and read back the same, every channel value")
    func hexText() throws {
        #expect(PixelKit.Colour(red: 10, green: 10, blue: 26).description == "#0A0A1A")
        #expect(PixelKit.Colour(red: 0, green: 255, blue: 0xF0).description == "#00FFF0")
        for value in 0...255 {
            let colour = PixelKit.Colour(red: UInt8(value), green: UInt8(255 - value), blue: UInt8(value / 3))
            let text = colour.description
            #expect(text == "#" + [value, 255 - value, value / 3].map { ($0 < 16 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined())
            #expect(PixelKit.Colour(hex: text) == colour)
        }
    }

    /// The reference conversion: the full-size image through icc_transform to
    /// sRGB (relative colorimetric, embedded profile), then the same 100 px centre square.
    static func referenceSquare(_ path: String, fallback: String) throws -> Pixels {
        let bytes = try Fixtures.bytes(path)
        let source = SourceBuffer(bytes)
        let image = try VImage.load(source, options: "")
        let converted = try image.iccToSRGB(inputProfile: fallback, embedded: true)
        return try Pixels(image: converted.thumbnail(width: 100, height: 100, crop: .centre))
    }

    @Test("embedded profiles are converted to sRGB, not relabelled",
          arguments: [("snaps/display-p3.jpg", "srgb"), ("snaps/adobe-rgb.jpg", "srgb"), ("snaps/cmyk-profile.jpg", "cmyk")])
    func converted(file: String, fallback: String) throws {
        let path = Fixtures.sample(file)
        let upload = try Fixtures.process(Fixtures.bytes(path), key: "c.jpg")
        let output = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        let reference = try Self.referenceSquare(path, fallback: fallback)
        // Region by region (10×10 block means), so that resampling noise does not count.
        let difference = output.blockDifference(reference)
        #expect(difference < 2.5, "\(file): block difference \(difference) from a full-image icc_transform")
        #expect(output.bands == 3)
    }

    @Test("P3 pixels are not passed through as if they were sRGB")
    func notRelabelled() throws {
        let path = Fixtures.sample("snaps/display-p3.jpg")
        let upload = try Fixtures.process(Fixtures.bytes(path), key: "p3.jpg")
        let output = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        // Relabelling would keep the stored P3 numbers.
        let raw = try Pixels(image: VImage.load(SourceBuffer(Fixtures.bytes(path)), options: "").thumbnail(width: 100, height: 100, crop: .centre))
        #expect(output.blockDifference(raw) > 4)
    }

    @Test("CMYK without a profile goes through a generic CMYK profile")
    func cmykWithoutProfile() throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/cmyk-noprofile.jpg")), key: "k.jpg")
        let output = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        let reference = try Self.referenceSquare(Fixtures.sample("snaps/cmyk-noprofile.jpg"), fallback: "cmyk")
        #expect(output.bands == 3)
        #expect(output.blockDifference(reference) < 2.5)
    }

    @Test("HEIC is decoded with its own profile and orientation")
    func heic() throws {
        let path = Fixtures.sample("snaps/iphone.heic")
        let upload = try Fixtures.process(Fixtures.bytes(path), key: "i.heic")
        #expect(upload.manifest.source.mediaType == "image/heic")
        #expect(upload.manifest.source.orientation == 1)
        let output = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        #expect(output.width == 100 && output.bands == 3)
        let header = try VImage.load(SourceBuffer(Fixtures.bytes(path)), options: "")
        do {
            let profile = try #require(header.blob("icc-profile-data"), "the HEIC sample carries a profile")
            // Reference: the header's profile attached to the decoded pixels, then converted.
            let decoded = try VImage.load(SourceBuffer(Fixtures.bytes(path)), options: "").withProfile(profile)
            let reference = try Pixels(image: decoded.iccToSRGB(inputProfile: "srgb", embedded: true).thumbnail(width: 100, height: 100, crop: .centre))
            #expect(output.blockDifference(reference) < 2.5)
            // and the conversion did something: the stored numbers differ.
            let raw = try Pixels(image: VImage.load(SourceBuffer(Fixtures.bytes(path)), options: "").thumbnail(width: 100, height: 100, crop: .centre))
            #expect(output.blockDifference(raw) > 4)
        }
        // Same bytes, same output: HEIC's profile handling is deterministic.
        let again = try Fixtures.process(Fixtures.bytes(path), key: "i.heic")
        #expect(again.blobs == upload.blobs)
    }

    @Test("HEIC follows its own transform boxes: an EXIF orientation tag is not applied again")
    func heicExifOrientation() throws {
        let plain = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/iphone.heic")), key: "a.heic")
        let tagged = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/heic-exif-orientation-6.heic")), key: "b.heic")
        // The fixture really carries the tag.
        let exif = try #require(VImage.load(SourceBuffer(Fixtures.bytes(Fixtures.sample("snaps/heic-exif-orientation-6.heic"))), options: "").blob("exif-data"))
        #expect(Exif.orientation(exif) == 6)
        #expect(tagged.manifest.source.orientation == 1)
        #expect(tagged.manifest.source.width == 1512 && tagged.manifest.source.height == 2016)
        #expect(Fixtures.blob(tagged, "square100") == Fixtures.blob(plain, "square100"))
    }

    @Test("16-bit input gives 8-bit output")
    func sixteenBit() throws {
        let path = Fixtures.sample("snaps/sixteen-bit.png")
        #expect(try VImage.load(SourceBuffer(Fixtures.bytes(path)), options: "").format == .ushort)
        let upload = try Fixtures.process(Fixtures.bytes(path), key: "16.png")
        let image = try VImage.load(SourceBuffer(Fixtures.blob(upload, "square100")), options: "")
        #expect(image.isUChar && image.bands == 3)
        // Not crushed to black or white by a missing rescale.
        let means = try Pixels(image: image).means
        #expect(means.allSatisfy { $0 > 10 && $0 < 245 }, "means \(means)")
    }

    @Test("transparent pixels are flattened onto the configured background")
    func alpha() throws {
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/alpha.png"))
        let dark = try Pixels(encoded: Fixtures.blob(Fixtures.process(bytes, key: "a.png"), "square100"))
        let corner = dark.pixel(1, 1)
        #expect(abs(corner[0] - 0x0A) <= 4 && abs(corner[1] - 0x0A) <= 4 && abs(corner[2] - 0x1A) <= 4, "corner \(corner)")

        let red = try Pixels(encoded: Fixtures.blob(Fixtures.process(bytes, key: "a.png") { $0.background = Colour(hex: "#FF0000")! }, "square100"))
        let redCorner = red.pixel(1, 1)
        #expect(redCorner[0] > 240 && redCorner[1] < 15 && redCorner[2] < 15, "corner \(redCorner)")
    }

    @Test("no output carries EXIF, XMP, IPTC, GPS or ICC metadata")
    func privacy() throws {
        let path = Fixtures.sample("snaps/gps-tagged.jpg")
        let input = try Fixtures.bytes(path)
        // The fixture really carries what we strip.
        #expect(contains(input, "Exif") && contains(input, "http://ns.adobe.com/xap/1.0/"))
        let upload = try Fixtures.process(input, key: "gps.jpg")
        let jpeg = Fixtures.blob(upload, "square100")
        let markers = jpegMarkers(jpeg)
        #expect(!markers.contains { (0xE1...0xEF).contains($0) }, "APP segments \(markers.map { String($0, radix: 16) })")
        #expect(!markers.contains(0xFE), "COM segment")
        for needle in ["Exif", "GPS", "http://ns.adobe.com", "ICC_PROFILE", "Photoshop 3.0"] {
            #expect(!contains(jpeg, needle), "\(needle) in square100")
        }
        for name in ["pixel25", "pixel100"] {
            #expect(pngChunks(Fixtures.blob(upload, name)) == ["IHDR", "PLTE", "IDAT", "IEND"])
        }
    }
}
