import Foundation
import Synchronization

/// The manifest's bytes, written directly: byte for byte what `JSONEncoder` writes
/// with `[.sortedKeys, .withoutEscapingSlashes]` (and `.prettyPrinted`), which
/// stays the definition (a test compares the two on many manifests and odd keys).
/// JSONEncoder built a tree of boxed values, sorted it and formatted every number
/// through Foundation for each image; this writes one buffer. The recipe is the
/// same for every image of a run, so its JSON is made once (by JSONEncoder) and
/// spliced in.
enum ManifestJSON {
    /// A JSON value with its object members already in the encoder's sorted order.
    indirect enum Value {
        case string(String)
        case int(Int)
        case bool(Bool)
        case null
        case object([(String, Value)])
        /// A value encoded elsewhere, compact and pretty (pretty at depth 0).
        case encoded(compact: [UInt8], pretty: [UInt8])
    }

    static func bytes(_ manifest: Manifest, pretty: Bool) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(pretty ? 3072 : 2048)
        write(value(manifest), pretty: pretty, depth: 0, into: &out)
        return out
    }

    static func value(_ manifest: Manifest) -> Value {
        var members: [(String, Value)] = []
        if let crop = manifest.crop {
            var m: [(String, Value)] = []
            if let faces = crop.faces { m.append(("faces", .int(faces))) }
            if let height = crop.height { m.append(("height", .int(height))) }
            if let left = crop.left { m.append(("left", .int(left))) }
            m.append(("source", .string(crop.source.rawValue)))
            if let top = crop.top { m.append(("top", .int(top))) }
            if let width = crop.width { m.append(("width", .int(width))) }
            members.append(("crop", .object(m)))
        }
        members.append(("key", .string(manifest.key)))
        if let producer = manifest.producer {
            members.append(("producer", .object([("name", .string(producer.name)), ("version", .string(producer.version))])))
        }
        let recipe = RecipeJSON.encoded(manifest.recipe)
        members.append(("recipe", .encoded(compact: recipe.compact, pretty: recipe.pretty)))
        members.append(("schema", .string(manifest.schema)))
        let s = manifest.source
        var source: [(String, Value)] = [("bytes", .int(s.bytes))]
        if let decodedFrom = s.decodedFrom { source.append(("decodedFrom", .string(decodedFrom.rawValue))) }
        source += [("digest", .string(s.digest)), ("height", .int(s.height)),
                   ("mediaType", .string(s.mediaType)), ("orientation", .int(s.orientation)), ("width", .int(s.width))]
        members.append(("source", .object(source)))
        let variants = manifest.variants.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        members.append(("variants", .object(variants.map { ($0.key, value($0.value)) })))
        return .object(members)
    }

    /// A variant's members in sorted order; optional ones only when present,
    /// except `budget`, written as `null` when there is none.
    static func value(_ v: Variant) -> Value {
        var m: [(String, Value)] = []
        if let base64Length = v.base64Length { m.append(("base64Length", .int(base64Length))) }
        m.append(("budget", v.budget.map { .int($0) } ?? .null))
        m.append(("budgetMode", .string(v.budgetMode.rawValue)))
        m.append(("bytes", .int(v.bytes)))
        if let colours = v.colours { m.append(("colours", .int(colours))) }
        m.append(("degraded", .bool(v.degraded)))
        m.append(("digest", .string(v.digest)))
        if let dither = v.dither { m.append(("dither", .bool(dither))) }
        m.append(("encodes", .int(v.encodes)))
        m.append(("height", .int(v.height)))
        m.append(("mediaType", .string(v.mediaType)))
        if let palette = v.palette { m.append(("palette", .string(palette))) }
        m.append(("path", .string(v.path)))
        if let quality = v.quality { m.append(("quality", .int(quality))) }
        m.append(("width", .int(v.width)))
        return .object(m)
    }

    static func write(_ value: Value, pretty: Bool, depth: Int, into out: inout [UInt8]) {
        switch value {
        case .string(let text): writeString(text, into: &out)
        case .int(let n): out.append(contentsOf: String(n).utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .encoded(let compact, let prettyBytes):
            guard pretty else { out.append(contentsOf: compact); return }
            // Indent every line after the first to this depth.
            for byte in prettyBytes {
                out.append(byte)
                if byte == 0x0A { out.append(contentsOf: repeatElement(0x20, count: 2 * depth)) }
            }
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            if members.isEmpty {
                if pretty { out.append(contentsOf: [0x0A, 0x0A] + repeatElement(0x20, count: 2 * depth)) }
                out.append(UInt8(ascii: "}"))
                return
            }
            for (i, (key, member)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                if pretty {
                    out.append(0x0A)
                    out.append(contentsOf: repeatElement(0x20, count: 2 * (depth + 1)))
                }
                writeString(key, into: &out)
                out.append(contentsOf: pretty ? [0x20, UInt8(ascii: ":"), 0x20] : [UInt8(ascii: ":")])
                write(member, pretty: pretty, depth: depth + 1, into: &out)
            }
            if pretty {
                out.append(0x0A)
                out.append(contentsOf: repeatElement(0x20, count: 2 * depth))
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, into out: inout [UInt8]) { JSONText.appendString(text, to: &out) }
}

/// JSON text written directly, shared by the manifest and the worker protocol.
public enum JSONText {
    /// Appends a JSON string as JSONEncoder escapes it: `"` and `\`, the control
    /// characters (`\b \f \n \r \t`, others as `\u00xx`); '/' and everything
    /// else as its UTF-8 bytes.
    public static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (keys, digests, paths) need no escape: their bytes at once, not one append each.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x22 && $0 != 0x5C }) { out.append(contentsOf: text.utf8) } else {
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
                case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x00..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// A JSON string literal for a log line or a message: `appendString`'s, with DEL and the C1
    /// controls escaped too, so that no text a file or a server supplied drives a terminal.
    public static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = []
        appendString(text, to: &bytes)
        let json = String(decoding: bytes, as: UTF8.self).unicodeScalars
        guard json.contains(where: { (0x7F...0x9F).contains($0.value) }) else { return String(json) }
        return String(String.UnicodeScalarView(json.flatMap { (0x7F...0x9F).contains($0.value) ? Array("\\u00\(String($0.value, radix: 16))".unicodeScalars) : [$0] }))
    }
}

/// The recipe's JSON, made once per recipe by JSONEncoder (compact and pretty)
/// and reused for every manifest that carries an equal recipe.
enum RecipeJSON {
    /// The last recipe seen, with its JSON: a run has one.
    private static let last = Mutex<(recipe: Recipe, compact: [UInt8], pretty: [UInt8])?>(nil)

    static func encoded(_ recipe: Recipe) -> (compact: [UInt8], pretty: [UInt8]) {
        if let hit = last.withLock({ $0.flatMap { $0.recipe == recipe ? ($0.compact, $0.pretty) : nil } }) { return hit }
        let compact = JSONEncoder()
        compact.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        // Encoding plain structs of strings and numbers cannot fail.
        let value = ([UInt8](try! compact.encode(recipe)), [UInt8](try! pretty.encode(recipe)))
        last.withLock { $0 = (recipe, value.0, value.1) }
        return value
    }
}
