@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit

/// The APNs Live Activity start payload the README shows, built from a manifest
/// and its square100 blob (`--budget-mode inline`).
struct LiveActivityStart: Encodable {
    struct APS: Encodable {
        struct ContentState: Encodable { var status: String; var sentAt: Int }
        struct Attributes: Encodable {
            var senderName: String
            var caption: String
            var messageId: String
            var conversationId: String
            var snapKey: String
            var thumbnailDigest: String
            var thumbnail: String
        }
        struct Alert: Encodable { var title: String; var body: String }
        var timestamp: Int
        var event = "start"
        var contentState: ContentState
        var attributesType = "SnapActivityAttributes"
        var attributes: Attributes
        var alert: Alert
        enum CodingKeys: String, CodingKey {
            case timestamp, event, contentState = "content-state", attributesType = "attributes-type", attributes, alert
        }
    }
    var aps: APS

    init(manifest: Manifest, square: [UInt8], sender: String, caption: String) {
        aps = APS(timestamp: 1_763_900_000, contentState: .init(status: "delivered", sentAt: 1_763_899_990),
                  attributes: .init(senderName: sender, caption: caption, messageId: "msg_01JDX8Q6ZP3N4K7R2VYB5TC9HW",
                                    conversationId: "conv_01JDX8P1M4W6T2Q9S7R3K5N8BD", snapKey: manifest.key,
                                    thumbnailDigest: manifest.variants["square100"]!.digest,
                                    thumbnail: Data(square).base64EncodedString()),
                  alert: .init(title: "\(sender) sent a snap", body: caption))
    }

    /// The bytes APNs counts: UTF-8 JSON, slashes not escaped (base64 has many).
    var json: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return try! encoder.encode(self)
    }
}

@Suite("Inline budget: the whole push payload fits")
struct LiveActivityPayloadTests {
    /// 30 characters with emoji, 40 characters: near the top of what the app allows.
    static let sender = "🌸 Zoë Łukasz-Ørsted 🎉🐙 Müller🦊"
    static let caption = "Sunset at the pier 🌅 — who's coming?! 🍦🙌"

    static var samples: [String] {
        ["snaps", "orientation"].flatMap { folder in
            ((try? FileManager.default.contentsOfDirectory(atPath: Fixtures.sample(folder))) ?? []).sorted().map { "\(folder)/\($0)" }
        }
    }

    @Test func theNamesAreAsLongAsTheIssueSays() {
        #expect(Self.sender.count == 30 && Self.sender.unicodeScalars.contains { $0.properties.isEmoji && $0.value > 0x2000 })
        #expect(Self.caption.count == 40)
        #expect(Self.samples.count >= 20)
    }

    @Test("every sample's start payload is at most 4096 bytes", arguments: samples)
    func payloadFits(sample: String) throws {
        let pipeline = try Fixtures.pipeline { $0.budgetMode = .inline }
        let upload = try pipeline.process(file: Fixtures.sample(sample), key: (sample as NSString).lastPathComponent)
        let square = Fixtures.blob(upload, "square100")
        let variant = try #require(upload.manifest.variants["square100"])
        let payload = LiveActivityStart(manifest: upload.manifest, square: square, sender: Self.sender, caption: Self.caption).json
        #expect(payload.count <= 4096, "\(sample): \(payload.count) bytes")
        #expect(variant.base64Length == Data(square).base64EncodedString().utf8.count)
        #expect(variant.budget == 4096 - Settings.defaultPayloadReserve)
        #expect(variant.base64Length! <= 4096 - Settings.defaultPayloadReserve)
    }

    @Test func theDefaultReserveCoversThePayloadWithoutWastingTheThumbnailsRoom() throws {
        let upload = try Fixtures.pipeline { $0.budgetMode = .inline }.process(file: Fixtures.sample("snaps/phone-portrait.jpg"), key: "phone-portrait.jpg")
        // Everything but the thumbnail: the same payload with an empty one.
        let rest = LiveActivityStart(manifest: upload.manifest, square: [], sender: Self.sender, caption: Self.caption).json.count
        #expect(rest <= Settings.defaultPayloadReserve, "the rest of the payload is \(rest) bytes")
        print("live activity start payload without its thumbnail: \(rest) bytes")
        #expect(Settings.defaultPayloadReserve - rest <= 256, "the reserve keeps \(Settings.defaultPayloadReserve - rest) bytes the thumbnail could use")
        // And a detailed photo does use its room (within one JPEG quality step of it).
        let square = try #require(upload.manifest.variants["square100"])
        #expect(square.base64Length! > (4096 - Settings.defaultPayloadReserve) * 8 / 10)
    }

    @Test func payloadLimitAndReserveSetTheSquaresBudgetAndCountInTheRecipeOnlyInline() throws {
        var settings = Settings()
        settings.budgetMode = .inline
        settings.payloadLimit = 3000
        settings.payloadReserve = 1000
        #expect(settings.squareBudget == 2000)
        settings.square.budget = 1500
        #expect(settings.squareBudget == 1500)
        settings.budgetMode = .bytes
        #expect(settings.squareBudget == 1500)
        #expect(Recipe(settings: Settings()).digest == Recipe(settings: { var s = Settings(); s.payloadReserve = 10; return s }()).digest)
        settings = Settings()
        settings.budgetMode = .inline
        settings.payloadReserve = 4090
        #expect(throws: SnapError.self) { try settings.validate() }
    }
}
