@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit

/// SnapThumb decodes JPEGs with libjpeg directly rather than through libvips'
/// jpegload: these tests hold it to libvips' results.
@Suite struct JPEGDecodeTests {
    static let jpegs = ["snaps/phone-portrait.jpg", "snaps/phone-rotated.jpg", "snaps/grey.jpg", "snaps/adobe-rgb.jpg",
                        "snaps/display-p3.jpg", "snaps/cmyk-noprofile.jpg", "snaps/cmyk-profile.jpg", "snaps/gps-tagged.jpg",
                        "orientation/orientation-6.jpg"]

    @Test("pixels, size, EXIF and ICC profile match libvips' jpegload at every shrink", arguments: jpegs)
    func matchesLibvips(_ name: String) throws {
        let source = SourceBuffer(try Fixtures.bytes(Fixtures.sample(name)))
        for shrink in [1, 2, 4, 8] {
            let decoder = try JPEGDecoder(source, failOn: 3)
            let reference = try VImage.load(source, options: "access=sequential,fail_on=warning,shrink=\(shrink)")
            #expect(decoder.width == (try VImage.load(source, options: "access=sequential")).width)
            #expect(decoder.exif == reference.blob("exif-data"), "\(name)")
            #expect(decoder.iccProfile == reference.blob("icc-profile-data"), "\(name)")
            let decoded = try decoder.decode(shrink: shrink)
            #expect(decoded.width == reference.width && decoded.height == reference.height && decoded.bands == reference.bands,
                    "\(name) at 1/\(shrink): \(decoded.width)×\(decoded.height)×\(decoded.bands) against \(reference.width)×\(reference.height)×\(reference.bands)")
            #expect(decoded.interpretation == reference.interpretation, "\(name)")
            #expect(try decoded.pixels() == reference.pixels(), "\(name) at 1/\(shrink)")
        }
    }

    @Test("a size that does not divide by the shrink rounds down, as libvips does")
    func oddSizeRoundsDown() throws {
        let bytes = try Fixtures.syntheticJPEG(width: 1077, height: 803)
        let source = SourceBuffer(bytes)
        let decoded = try JPEGDecoder(source, failOn: 3).decode(shrink: 8)
        #expect(decoded.width == 134 && decoded.height == 100)
        let reference = try VImage.load(source, options: "shrink=8")
        #expect(try decoded.pixels() == reference.pixels())
    }

    @Test("kill stops the decode with an error, baseline or progressive")
    func kill() throws {
        let baseline = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        // Progressive: libjpeg reads every scan before the first row comes out.
        let progressive = try VImage.load(SourceBuffer(baseline), options: "").jpeg(quality: 85, progressive: true)
        for bytes in [baseline, progressive] {
            let source = SourceBuffer(bytes)
            #expect(try JPEGDecoder(source, failOn: 3).isMultiscan == (bytes == progressive))
            let decoder = try JPEGDecoder(source, failOn: 3)
            decoder.kill()
            do {
                _ = try decoder.decode(shrink: 8)
                Issue.record("decoded after kill")
            } catch let error as VipsError {
                #expect(error.message == "killed")
            }
            // Not killed, the same file decodes.
            #expect(try JPEGDecoder(source, failOn: 3).decode(shrink: 8).width == 135)
        }
    }

    @Test("a libjpeg warning fails the image at fail_on warning and only there")
    func warningsFollowFailOn() throws {
        // Three stray bytes before the SOS marker: libjpeg warns "extraneous bytes".
        var bytes = try JPEG.Plan(rgb: Fixtures.syntheticRGB(width: 320, height: 240), width: 320, height: 240).write(quality: 85)
        let sos = try #require((0..<bytes.count - 1).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
        bytes.insert(contentsOf: [0x00, 0x01, 0x02], at: sos)
        do {
            _ = try Fixtures.process(bytes) { $0.failOn = .warning }
            Issue.record("a warning passed at fail_on warning")
        } catch let error as SnapError {
            #expect(error.code == .corrupt)
            #expect(error.message.contains("extraneous"), "\(error.message)")
        }
        for level in [Settings.FailOn.truncated, .error] {
            let upload = try Fixtures.process(bytes) { $0.failOn = level }
            #expect(upload.manifest.source.width == 320)
        }
    }

    @Test("garbage after the JPEG signature is corrupt, not a crash")
    func garbageHeader() throws {
        for tail in [[UInt8](), [0xFF], [0xFF, 0xDB, 0x00], [UInt8](repeating: 0xFF, count: 64), (0..<300).map { UInt8($0 % 256) }] {
            #expect(throws: SnapError.self) { _ = try Fixtures.process([0xFF, 0xD8] + tail) }
        }
    }
}
