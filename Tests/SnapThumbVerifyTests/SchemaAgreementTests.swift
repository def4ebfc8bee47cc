@testable import SnapThumbStore
@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import SnapThumbVerify
import VipsKit

/// The manifest writer and the published schema agree on every input: each
/// sample, and the images at the edges (one colour, one pixel), makes a
/// manifest that `verify` accepts. (`Fixtures.process` checks every manifest the
/// other tests make too.)
@Suite("Manifests and the schema agree")
struct SchemaAgreementTests {
    static let samples: [String] = ["snaps", "orientation"].flatMap { folder in
        ((try? FileManager.default.contentsOfDirectory(atPath: Fixtures.sample(folder))) ?? [])
            .filter { !$0.hasPrefix(".") }.sorted().map { "\(folder)/\($0)" }
    }

    @Test("Every sample's manifest validates against the schema", arguments: samples)
    func sample(_ relative: String) throws {
        let upload = try Fixtures.process(try Fixtures.bytes(Fixtures.sample(relative)), key: relative)
        #expect(Fixtures.schema.validate(upload.manifest.json(pretty: true)) == [])
    }

    static func flat(_ value: UInt8, width: Int = 300, height: Int = 300) throws -> [UInt8] {
        try VImage.fromRGB([UInt8](repeating: value, count: width * height * 3), width: width, height: height).jpeg(quality: 95)
    }

    @Test("A one-colour image is a valid result: colours 1, and its store verifies", arguments: [0, 128, 255])
    func oneColour(_ value: Int) throws {
        let upload = try Fixtures.process(try Self.flat(UInt8(value)), key: "flat-\(value).jpg")
        #expect(upload.manifest.variants["pixel25"]?.colours == 1)
        #expect(upload.manifest.variants["pixel100"]?.colours == 1)

        let root = Fixtures.tempDirectory("snapthumb-schema")
        defer { Fixtures.remove(root) }
        let store = try Store(root: root)
        try store.commit(upload)
        // Its PNG, fed back in, is a one-colour PNG input.
        let png = Fixtures.blob(upload, "pixel100")
        try store.commit(try Fixtures.process(png, key: "flat-\(value).png"))
        let report = try StoreVerifier.verify(root: root)
        #expect(report.problems == [])
        #expect(report.manifests == 2)
    }

    @Test("A one-pixel image validates")
    func onePixel() throws {
        let upload = try Fixtures.process(try Self.flat(200, width: 1, height: 1), key: "dot.jpg")
        #expect(Fixtures.schema.validate(upload.manifest.json(pretty: true)) == [])
    }
}
