@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit

/// Issue 41: a HEIC as phones write it carries a small thumbnail beside its primary
/// image; when it is big enough and of the same shape it is decoded instead.
@Suite("HEIF embedded thumbnail")
struct HEIFThumbnailTests {
    static func fixture(_ name: String) throws -> [UInt8] {
        try Fixtures.bytes("\(Fixtures.root)/Tests/Fixtures/heic/\(name)")
    }

    @Test("a thumbnail at least twice the square on its short side is decoded instead of the primary, and says so")
    func thumbnailServes() throws {
        let upload = try Fixtures.process(Self.fixture("thumbnail-240x320.heic"), key: "t.heic")
        #expect(upload.manifest.source.decodedFrom == .thumbnail)
        // The source's size is still the primary image's.
        #expect(upload.manifest.source.width == 600 && upload.manifest.source.height == 800)
        #expect(String(decoding: upload.manifest.json(), as: UTF8.self).contains(#""decodedFrom":"thumbnail""#))
    }

    @Test("a thumbnail too small for the square is not used: the primary image is decoded")
    func tooSmallThumbnail() throws {
        let upload = try Fixtures.process(Self.fixture("thumbnail-too-small.heic"), key: "s.heic")
        #expect(upload.manifest.source.decodedFrom == .primary)
    }

    @Test("the square from the thumbnail stays faithful to the one from the primary image")
    func faithful() throws {
        // Both files hold the same picture at the same quality; one is read from its thumbnail.
        let fromThumbnail = try Pixels(encoded: Fixtures.blob(Fixtures.process(Self.fixture("thumbnail-240x320.heic"), key: "t.heic"), "square100"))
        let fromPrimary = try Pixels(encoded: Fixtures.blob(Fixtures.process(Self.fixture("thumbnail-too-small.heic"), key: "s.heic"), "square100"))
        let difference = fromThumbnail.meanDifference(fromPrimary)
        #expect(difference < 6, "mean difference \(difference)")
        // The comparison can tell pictures apart: a JPEG snap's square differs clearly.
        let other = try Pixels(encoded: Fixtures.blob(Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/grey.jpg")), key: "g.jpg"), "square100"))
        #expect(fromThumbnail.meanDifference(other) > 3 * max(difference, 1))
    }

    @Test("the thumbnail is used only when its shape is the primary's (within 1 %) and it is big enough")
    func rule() throws {
        let bytes = try Self.fixture("thumbnail-240x320.heic")
        let source = SourceBuffer(bytes)
        try DecodeStep.startLibvips()
        #expect(HEIF.usableThumbnail(source, primarySize: (600, 800), minShortSide: 200)! == (240, 320))
        // Another aspect ratio than the primary's (a thumbnail stored unrotated): not used.
        #expect(HEIF.usableThumbnail(source, primarySize: (800, 600), minShortSide: 200) == nil)
        #expect(HEIF.usableThumbnail(source, primarySize: (600, 820), minShortSide: 200) == nil)
        // Too small for what the variants need.
        #expect(HEIF.usableThumbnail(source, primarySize: (600, 800), minShortSide: 242) == nil)
        // A file without a thumbnail: libvips answers with the primary image, which is not one.
        let plain = SourceBuffer(try Fixtures.bytes(Fixtures.sample("snaps/iphone.heic")))
        #expect(HEIF.usableThumbnail(plain, primarySize: (1512, 2016), minShortSide: 200) == nil)
    }

    @Test("other formats' manifests carry no decodedFrom (their bytes are unchanged)")
    func jpegUnchanged() throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/grey.jpg")), key: "g.jpg")
        #expect(upload.manifest.source.decodedFrom == nil)
        #expect(!String(decoding: upload.manifest.json(), as: UTF8.self).contains("decodedFrom"))
    }
}
