@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbStore
import SnapThumbVerify
@testable import SnapThumbCore
import VipsKit

@Suite("Bad input and limits")
struct InputTests {
    @Test("each bad input is refused with its code and nothing is stored", arguments: [
        ("bad/truncated.jpg", ErrorCode.corrupt),
        ("bad/corrupt.jpg", .corrupt),
        ("bad/not-an-image.jpg", .unsupported),
        ("bad/empty.png", .corrupt),
        ("bad/vector.svg", .unsupported),
        ("bad/document.pdf", .unsupported),
        ("bad/tiff-image.tif", .unsupported),
        ("bad/bomb.png", .tooLarge),
        ("bad/bomb.jpg", .tooLarge),
    ])
    func refused(file: String, code: ErrorCode) throws {
        let directory = Fixtures.tempDirectory()
        defer { Fixtures.remove(directory) }
        let store = try Store(root: directory)
        let pipeline = try Fixtures.pipeline()
        do {
            let upload = try pipeline.process(file: Fixtures.sample(file), key: "bad")
            try store.commit(upload)
            Issue.record("\(file) was accepted")
        } catch let error as SnapError {
            #expect(error.code == code, "\(file): \(error)")
            #expect(!error.message.isEmpty)
        }
        let report = try StoreVerifier.verify(root: directory)
        #expect(report.blobs == 0 && report.manifests == 0)
    }

    @Test("a truncated JPEG is an error, not a grey thumbnail, at every strictness")
    func truncatedAtEveryLevel() throws {
        let whole = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let cut = Array(whole.prefix(whole.count / 2))
        for level in Settings.FailOn.allCases {
            #expect(throws: SnapError(.corrupt, "")) {
                do { _ = try Fixtures.process(cut) { $0.failOn = level } } catch let e as SnapError { throw SnapError(e.code, "") }
            }
        }
    }

    @Test("limits are checked from the header and named in the message")
    func limits() throws {
        let photo = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        do {
            _ = try Fixtures.process(photo) { $0.limits.maxPixels = 1_000_000 }
            Issue.record("accepted over the pixel limit")
        } catch let error as SnapError {
            #expect(error.code == .tooLarge)
            #expect(error.message.contains("1000000") && error.message.contains("1080×1440"))
        }
        do {
            _ = try Fixtures.process(photo) { $0.limits.maxInputBytes = 1000 }
            Issue.record("accepted over the byte limit")
        } catch let error as SnapError {
            #expect(error.code == .tooLarge)
            #expect(error.message.contains("1000 bytes"))
        }
    }

    @Test("images that must be decoded whole have their own, lower pixel limit")
    func fullDecodeLimit() throws {
        let heic = try Fixtures.bytes(Fixtures.sample("snaps/iphone.heic"))
        do {
            _ = try Fixtures.process(heic) { $0.limits.maxPixelsFullDecode = 1_000_000 }
            Issue.record("accepted a HEIC over the full-decode limit")
        } catch let error as SnapError {
            #expect(error.code == .tooLarge && error.message.contains("maxPixelsFullDecode"))
        }
        // A baseline JPEG streams: the full-decode limit does not apply to it.
        _ = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))) { $0.limits.maxPixelsFullDecode = 1_000_000 }
        // A progressive one does not.
        let progressive = try VImage.load(SourceBuffer(Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))), options: "")
        let interlaced = try progressive.jpeg(quality: 85, progressive: true)
        #expect(throws: SnapError.self) { try Fixtures.process(interlaced) { $0.limits.maxPixelsFullDecode = 1_000_000 } }
    }

    @Test("accepted formats", arguments: [
        ("snaps/landscape.webp", "image/webp"), ("snaps/animated.gif", "image/gif"), ("snaps/tiny.png", "image/png"),
        ("snaps/grey.jpg", "image/jpeg"), ("snaps/iphone.heic", "image/heic"), ("snaps/small.avif", "image/avif"),
    ])
    func accepted(file: String, mediaType: String) throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample(file)), key: "x")
        #expect(upload.manifest.source.mediaType == mediaType)
        let square = try Pixels(encoded: Fixtures.blob(upload, "square100"))
        #expect(square.width == 100 && square.height == 100 && square.bands == 3)
    }

    @Test("unsafe keys are refused", arguments: ["", "../x.jpg", "/etc/passwd", "a/../../b.jpg", "a//b.jpg", "./a.jpg", "a\u{01}b.jpg", "a\nb.jpg", String(repeating: "x", count: 300)])
    func unsafeKeys(key: String) throws {
        #expect(throws: SnapError.self) { try StoreKey.validate(key) }
        do { try StoreKey.validate(key) } catch let error as SnapError { #expect(error.code == .unsafeName) }
        let jpeg = try Fixtures.syntheticJPEG()
        do { _ = try Fixtures.process(jpeg, key: key); Issue.record("processed unsafe key") } catch let error as SnapError {
            #expect(error.code == .unsafeName)
        }
    }

    @Test("ordinary keys are fine", arguments: ["a.jpg", "2026/11/a.jpg", "snap with spaces.jpg", "émoji-📷.heic", ".hidden.jpg"])
    func safeKeys(key: String) throws {
        try StoreKey.validate(key)
    }

    @Test("settings are validated with sentences that say what is allowed")
    func settingsValidation() throws {
        var settings = Settings()
        settings.pixel.colours = 300
        #expect(throws: SnapError.self) { try settings.validate() }
        do { try settings.validate() } catch let error as SnapError {
            #expect(error.code == .config && error.message.contains("2–256") && error.message.contains("300"))
        }
        settings = Settings()
        settings.square.qualityMin = 95
        settings.square.qualityMax = 90
        #expect(throws: SnapError.self) { try settings.validate() }
    }

    @Test("config files: partial settings, unknown keys refused, bad colours named")
    func configFile() throws {
        let partial = try JSONDecoder().decode(Settings.self, from: Data(#"{"square":{"budget":3000},"pixel":{"palette":"pico8"}}"#.utf8))
        #expect(partial.square.budget == 3000 && partial.square.size == 100)
        #expect(partial.pixel.palette == .named("pico8"))
        let noBudget = try JSONDecoder().decode(Settings.self, from: Data(#"{"square":{"budget":null}}"#.utf8))
        #expect(noBudget.square.budget == nil)
        #expect(throws: SnapError.self) { try JSONDecoder().decode(Settings.self, from: Data(#"{"squre":{}}"#.utf8)) }
        #expect(throws: SnapError.self) { try JSONDecoder().decode(Settings.self, from: Data(#"{"background":"navy"}"#.utf8)) }
    }
}
