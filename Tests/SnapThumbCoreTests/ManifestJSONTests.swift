@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore

/// The manifest writer makes JSONEncoder's bytes exactly (the manifest is a
/// contract, and stores compare it byte for byte), on real manifests of every
/// setting that shapes one, and on keys and values that need escaping.
@Suite("Manifest JSON")
struct ManifestJSONTests {
    static func same(_ manifest: Manifest, sourceLocation: SourceLocation = #_sourceLocation) {
        for pretty in [false, true] {
            let direct = manifest.json(pretty: pretty), encoder = manifest.encoderJSON(pretty: pretty)
            #expect(direct == encoder, "pretty \(pretty): \(String(decoding: direct, as: UTF8.self)) vs \(String(decoding: encoder, as: UTF8.self))",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("real manifests, every shape of variant", arguments: 0..<5)
    func real(_ shape: Int) throws {
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let upload = try Fixtures.process(bytes) { settings in
            switch shape {
            case 1: settings.square.budget = nil; settings.pixel.budget = nil
            case 2: settings.budgetMode = .inline
            case 3: settings.pixel.palette = .named("pico8"); settings.pixel.dither = true
            case 4: settings.square.budget = 700; settings.pixel.colours = 2
            default: break
            }
        }
        Self.same(upload.manifest)
    }

    @Test("keys and values that need escaping, and absent optionals")
    func escaping() throws {
        let upload = try Fixtures.process(try Fixtures.bytes(Fixtures.sample("snaps/grey.jpg")))
        let keys = ["a\"b.jpg", "dir/sub/ü.jpg", "\u{301}a.jpg", "emoji 😀.png", "tab\there", "nl\nx", "ctl\u{1}\u{1F}\u{7F}",
                    "back\\slash", "sep\u{2028}\u{2029}", "slash/and/more/", "", "zero\u{0}byte", "\u{FEFF}bom"]
        for key in keys {
            var manifest = upload.manifest
            manifest.key = key
            Self.same(manifest)
        }
        var bare = upload.manifest
        bare.producer = nil
        for name in bare.variants.keys {
            bare.variants[name]?.base64Length = nil
            bare.variants[name]?.budget = nil
            bare.variants[name]?.quality = nil
            bare.variants[name]?.colours = nil
            bare.variants[name]?.palette = nil
            bare.variants[name]?.dither = nil
        }
        bare.variants["square100-avif"] = upload.manifest.variants["square100"]
        bare.variants["a"] = upload.manifest.variants["pixel25"]
        Self.same(bare)
        bare.variants = [:]
        Self.same(bare)
    }

    @Test("a decoded manifest writes back to the same bytes")
    func roundTrip() throws {
        let upload = try Fixtures.process(try Fixtures.bytes(Fixtures.sample("snaps/landscape.webp")))
        let decoded = try Manifest.decode(upload.manifest.json(pretty: true))
        #expect(decoded.json(pretty: true) == upload.manifest.json(pretty: true))
        Self.same(decoded)
    }
}
