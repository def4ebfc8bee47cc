import Foundation
import Testing
import SnapThumbCore

/// The one JSON string writer for log lines and messages (`JSONText.quoted`): the
/// manifest writer's escaping, plus DEL and the C1 controls, and always valid JSON.
@Suite("JSON text for logs and messages")
struct JSONTextTests {
    @Test("quoted is the manifest writer's escaping, with DEL and C1 controls escaped too, and parses back")
    func quoted() throws {
        for text in ["a.jpg", "snap \"one\"\\two/three", "tab\tnew\nline\r", "\u{08}\u{0C}\u{01}\u{1F}", "é 🍕", "esc\u{1B}[31m", "del\u{7F} c1\u{85}\u{9B}", ""] {
            let quoted = JSONText.quoted(text)
            var manifest: [UInt8] = []
            JSONText.appendString(text, to: &manifest)
            let printable = !text.unicodeScalars.contains { (0x7F...0x9F).contains($0.value) }
            if printable { #expect(quoted == String(decoding: manifest, as: UTF8.self)) }
            #expect(!quoted.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }, "\(quoted)")
            let back = try JSONDecoder().decode(String.self, from: Data(quoted.utf8))
            #expect(back == text)
        }
        #expect(JSONText.quoted("del\u{7F} c1\u{85}") == #""del\u007f c1\u0085""#)
        #expect(JSONText.quoted("esc\u{1B}") == #""esc\u001b""#)
    }
}
