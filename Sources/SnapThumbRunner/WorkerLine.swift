import Foundation
import SnapThumbCore
import SnapThumbStore

/// The line protocol between a backfill and its `snapthumb worker` processes:
/// one JSON object per line each way (written and read by `WorkerLine`).
enum WorkerProtocol {
    struct Job: Codable, Equatable {
        /// Index of the file in the run.
        var i: Int
        var path: String
        var key: String
        var size: Int
        /// The store's listing showed no manifest for this key.
        var absent: Bool?
        /// The path byte for byte, only when it is not UTF-8 (`path` is then escaped).
        var raw: [UInt8]? = nil
        /// Blobs the store holds that this worker has not been told of yet (a
        /// bucket's listing, other workers' writes): it does not write them again.
        var blobs: [String]? = nil
        /// Answer a published or repeated upload with its manifest (`process` prints it).
        var manifest: Bool? = nil
        /// What the notification announced (`FileWalker.Entry.expected`): the generation
        /// (decimal), the size, the MD5 (base64).
        var generation: String? = nil
        var bytes: Int? = nil
        var md5: String? = nil

        /// Carries the entry's expectation.
        mutating func expect(_ expected: SourceExpectation?) {
            generation = expected?.generation.map { String($0) }
            bytes = expected?.size.map { Int($0) }
            md5 = expected?.md5.map { Data($0).base64EncodedString() }
        }

        /// The expectation the job carries (nil when none).
        var expected: SourceExpectation? {
            let expected = SourceExpectation(generation: generation.flatMap { Int64($0) }, size: bytes.map { Int64($0) },
                                             md5: md5.flatMap { Data(base64Encoded: $0) }.map { Array($0) })
            return expected.isEmpty ? nil : expected
        }
    }

    struct Reply: Codable, Equatable {
        var i: Int
        /// `staged` (processed, being committed: another answer follows), then
        /// `processed`; or `skipped` or `failed`.
        var outcome: String
        var ms: Double
        var code: ErrorCode?
        var message: String?
        /// The published upload's variants (processed only).
        var variants: [String: VariantBrief]?
        /// The worker's peak RSS so far, in bytes (for `bench`).
        var rss: Int?
        /// The source's digest (processed only).
        var digest: String?
        /// The source digest of another upload's manifest that this publish replaced.
        var replaced: String?
        /// The key had a manifest of the same source under another recipe: made again (processed only).
        var rederived: Bool? = nil
        /// The upload's manifest as published, when the job asked for it.
        var manifest: String? = nil
        /// The blobs the store now holds for this upload (processed, bucket stores only).
        var blobs: [String]? = nil
    }
}

/// The worker protocol's lines, written and read directly. Each job and each
/// answer crossed JSONEncoder and JSONDecoder on both sides of the pipe, about 5 %
/// of a worker's CPU per image; these few fixed shapes need neither. The lines
/// stay JSON, one object per line, so a person can still read a captured session.
enum WorkerLine {
    // MARK: Writing

    static func encode(_ job: WorkerProtocol.Job) -> [UInt8] {
        var w = Writer()
        w.open()
        w.field("i", job.i)
        w.field("path", job.path)
        w.field("key", job.key)
        w.field("size", job.size)
        if let absent = job.absent { w.field("absent", absent) }
        if let raw = job.raw { w.key("raw"); w.intArray(raw.map { Int($0) }) }
        if let blobs = job.blobs { w.key("blobs"); w.stringArray(blobs) }
        if let manifest = job.manifest { w.field("manifest", manifest) }
        if let generation = job.generation { w.field("generation", generation) }
        if let bytes = job.bytes { w.field("bytes", bytes) }
        if let md5 = job.md5 { w.field("md5", md5) }
        w.close()
        return w.bytes
    }

    static func encode(_ reply: WorkerProtocol.Reply) -> [UInt8] {
        var w = Writer()
        w.open()
        w.field("i", reply.i)
        w.field("outcome", reply.outcome)
        w.key("ms"); w.double(reply.ms)
        if let code = reply.code { w.field("code", code.rawValue) }
        if let message = reply.message { w.field("message", message) }
        if let variants = reply.variants {
            w.key("variants")
            w.open()
            for (name, v) in variants.sorted(by: { $0.key < $1.key }) {
                w.key(name)
                w.open()
                w.field("bytes", v.bytes)
                if let budget = v.budget { w.field("budget", budget) }
                w.field("budgetMode", v.budgetMode.rawValue)
                w.field("encodes", v.encodes)
                w.field("degraded", v.degraded)
                w.close()
            }
            w.close()
        }
        if let rss = reply.rss { w.field("rss", rss) }
        if let digest = reply.digest { w.field("digest", digest) }
        if let replaced = reply.replaced { w.field("replaced", replaced) }
        if let rederived = reply.rederived { w.field("rederived", rederived) }
        if let manifest = reply.manifest { w.field("manifest", manifest) }
        if let blobs = reply.blobs { w.key("blobs"); w.stringArray(blobs) }
        w.close()
        return w.bytes
    }

    struct Writer {
        var bytes: [UInt8] = []
        private var first = true

        init() { bytes.reserveCapacity(256) }

        mutating func open() { bytes.append(UInt8(ascii: "{")); first = true }
        mutating func close() { bytes.append(UInt8(ascii: "}")); first = false }

        mutating func key(_ name: String) {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            string(name)
            bytes.append(UInt8(ascii: ":"))
        }

        mutating func field(_ name: String, _ value: Int) { key(name); number(value) }
        mutating func field(_ name: String, _ value: String) { key(name); string(value) }
        mutating func field(_ name: String, _ value: Bool) { key(name); bytes.append(contentsOf: (value ? "true" : "false").utf8) }

        mutating func number(_ n: Int) { bytes.append(contentsOf: String(n).utf8) }

        /// Shortest round-trip form; never infinite or NaN here (a duration).
        mutating func double(_ x: Double) { bytes.append(contentsOf: (x.isFinite ? "\(x)" : "0").utf8) }

        mutating func intArray(_ items: [Int]) {
            bytes.append(UInt8(ascii: "["))
            for (k, item) in items.enumerated() {
                if k > 0 { bytes.append(UInt8(ascii: ",")) }
                number(item)
            }
            bytes.append(UInt8(ascii: "]"))
        }

        mutating func stringArray(_ items: [String]) {
            bytes.append(UInt8(ascii: "["))
            for (k, item) in items.enumerated() {
                if k > 0 { bytes.append(UInt8(ascii: ",")) }
                string(item)
            }
            bytes.append(UInt8(ascii: "]"))
        }

        mutating func string(_ text: String) { JSONText.appendString(text, to: &bytes) }
    }

    // MARK: Reading

    /// A JSON value: all the protocol's lines hold.
    indirect enum Value {
        case object([String: Value])
        case array([Value])
        case string(String)
        case number(Double, Int?)
        case bool(Bool)
        case null

        subscript(_ key: String) -> Value? {
            if case .object(let members) = self { return members[key] }
            return nil
        }
        var int: Int? { if case .number(_, let n) = self { return n }; return nil }
        var double: Double? { if case .number(let x, _) = self { return x }; return nil }
        var string: String? { if case .string(let s) = self { return s }; return nil }
        var bool: Bool? { if case .bool(let b) = self { return b }; return nil }
        var array: [Value]? { if case .array(let a) = self { return a }; return nil }
    }

    static func job(_ line: Data) -> WorkerProtocol.Job? {
        guard let v = parse(line), let i = v["i"]?.int, let path = v["path"]?.string, let key = v["key"]?.string,
              let size = v["size"]?.int else { return nil }
        var job = WorkerProtocol.Job(i: i, path: path, key: key, size: size, absent: v["absent"]?.bool)
        if let raw = v["raw"]?.array { job.raw = raw.compactMap { $0.int.flatMap { UInt8(exactly: $0) } } }
        if let blobs = v["blobs"]?.array { job.blobs = blobs.compactMap(\.string) }
        job.manifest = v["manifest"]?.bool
        job.generation = v["generation"]?.string
        job.bytes = v["bytes"]?.int
        job.md5 = v["md5"]?.string
        return job
    }

    static func reply(_ line: Data) -> WorkerProtocol.Reply? {
        guard let v = parse(line), let i = v["i"]?.int, let outcome = v["outcome"]?.string, let ms = v["ms"]?.double else { return nil }
        var reply = WorkerProtocol.Reply(i: i, outcome: outcome, ms: ms, code: v["code"]?.string.flatMap(ErrorCode.init(rawValue:)),
                                         message: v["message"]?.string, variants: nil)
        if case .object(let variants)? = v["variants"] {
            var briefs: [String: VariantBrief] = [:]
            for (name, b) in variants {
                guard let bytes = b["bytes"]?.int, let mode = b["budgetMode"]?.string.flatMap(Settings.BudgetMode.init(rawValue:)),
                      let encodes = b["encodes"]?.int, let degraded = b["degraded"]?.bool else { return nil }
                briefs[name] = VariantBrief(bytes: bytes, budget: b["budget"]?.int, budgetMode: mode, encodes: encodes, degraded: degraded)
            }
            reply.variants = briefs
        }
        reply.rss = v["rss"]?.int
        reply.digest = v["digest"]?.string
        reply.replaced = v["replaced"]?.string
        reply.rederived = v["rederived"]?.bool
        reply.manifest = v["manifest"]?.string
        if let blobs = v["blobs"]?.array { reply.blobs = blobs.compactMap(\.string) }
        return reply
    }

    /// Parses one JSON value (the whole line); nil when it is not JSON.
    static func parse(_ line: Data) -> Value? {
        line.withUnsafeBytes { raw -> Value? in
            var parser = Parser(bytes: raw.bindMemory(to: UInt8.self))
            guard let value = parser.value() else { return nil }
            parser.skipSpace()
            return parser.offset == parser.bytes.count ? value : nil
        }
    }

    struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var offset = 0

        mutating func skipSpace() {
            while offset < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[offset]) { offset += 1 }
        }

        mutating func value(depth: Int = 0) -> Value? {
            skipSpace()
            guard offset < bytes.count, depth < 16 else { return nil }
            switch bytes[offset] {
            case UInt8(ascii: "{"):
                offset += 1
                var members: [String: Value] = [:]
                skipSpace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "}") { offset += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard let key = string() else { return nil }
                    skipSpace()
                    guard offset < bytes.count, bytes[offset] == UInt8(ascii: ":") else { return nil }
                    offset += 1
                    guard let member = value(depth: depth + 1) else { return nil }
                    members[key] = member
                    skipSpace()
                    guard offset < bytes.count else { return nil }
                    if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                    if bytes[offset] == UInt8(ascii: "}") { offset += 1; return .object(members) }
                    return nil
                }
            case UInt8(ascii: "["):
                offset += 1
                var items: [Value] = []
                skipSpace()
                if offset < bytes.count, bytes[offset] == UInt8(ascii: "]") { offset += 1; return .array(items) }
                while true {
                    guard let item = value(depth: depth + 1) else { return nil }
                    items.append(item)
                    skipSpace()
                    guard offset < bytes.count else { return nil }
                    if bytes[offset] == UInt8(ascii: ",") { offset += 1; continue }
                    if bytes[offset] == UInt8(ascii: "]") { offset += 1; return .array(items) }
                    return nil
                }
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default: return number()
            }
        }

        mutating func literal(_ word: String, _ value: Value) -> Value? {
            let w = Array(word.utf8)
            guard offset + w.count <= bytes.count, Array(bytes[offset..<(offset + w.count)]) == w else { return nil }
            offset += w.count
            return value
        }

        mutating func number() -> Value? {
            let start = offset
            while offset < bytes.count, "+-0123456789.eE".utf8.contains(bytes[offset]) { offset += 1 }
            guard offset > start else { return nil }
            let text = String(decoding: bytes[start..<offset], as: UTF8.self)
            guard let x = Double(text) else { return nil }
            return .number(x, Int(text))
        }

        mutating func string() -> String? {
            guard offset < bytes.count, bytes[offset] == UInt8(ascii: "\"") else { return nil }
            offset += 1
            var out: [UInt8] = []
            while offset < bytes.count {
                let byte = bytes[offset]
                offset += 1
                switch byte {
                case UInt8(ascii: "\""):
                    return String(decoding: out, as: UTF8.self)
                case 0x5C:
                    guard offset < bytes.count else { return nil }
                    let escaped = bytes[offset]
                    offset += 1
                    switch escaped {
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "u"):
                        guard var scalar = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(scalar) {
                            // A surrogate pair: \uD83D\uDE00.
                            guard offset + 1 < bytes.count, bytes[offset] == 0x5C, bytes[offset + 1] == UInt8(ascii: "u") else { return nil }
                            offset += 2
                            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { return nil }
                        out.append(contentsOf: Array(String(Character(unicode)).utf8))
                    default: out.append(escaped)
                    }
                default:
                    out.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard offset + 4 <= bytes.count,
                  let n = UInt32(String(decoding: bytes[offset..<(offset + 4)], as: UTF8.self), radix: 16) else { return nil }
            offset += 4
            return n
        }
    }
}
