import Foundation
import SnapThumbCore

/// A strict JSON syntax check for config files (RFC 8259, plus no duplicate keys).
/// Foundation's parsers are lenient about some of this, and the last of two
/// duplicate keys silently wins: a config mistake must be an error naming its place.
public enum StrictJSON {
    /// Where a key starts in the file, 1-based.
    public struct Position: Sendable, Equatable, CustomStringConvertible {
        public let line: Int
        public let column: Int
        public var description: String { "\(line):\(column)" }
    }

    /// Throws a `config` error whose message starts with `<line>:<column>:`. Returns where every
    /// object key starts, by its dotted path (`pipeline.square.budget`), for later messages.
    @discardableResult
    public static func check(_ data: Data) throws -> [String: Position] {
        var parser = Parser(bytes: [UInt8](data))
        try parser.skipSpace()
        try parser.value(path: "")
        try parser.skipSpace()
        if parser.i < parser.bytes.count { throw parser.fail("unexpected text after the end of the document") }
        return parser.positions
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0
        var positions: [String: Position] = [:]

        init(bytes: [UInt8]) {
            self.bytes = bytes
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
        }

        func fail(_ what: String) -> SnapError {
            SnapError(.config, "\(position(of: i)): \(what)")
        }

        func position(of offset: Int) -> Position {
            let before = bytes[..<min(offset, bytes.count)]
            let line = before.filter { $0 == 0x0A }.count + 1
            let column = offset - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
            return Position(line: line, column: column)
        }

        var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

        mutating func skipSpace() throws {
            while let c = peek, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { i += 1 }
        }

        mutating func expect(_ c: UInt8, _ what: String) throws {
            guard peek == c else { throw fail("expected \(what)") }
            i += 1
        }

        mutating func value(path: String) throws {
            switch peek {
            case UInt8(ascii: "{"): try object(path: path)
            case UInt8(ascii: "["): try array(path: path)
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "t"): try literal("true")
            case UInt8(ascii: "f"): try literal("false")
            case UInt8(ascii: "n"): try literal("null")
            case let c? where c == UInt8(ascii: "-") || (0x30...0x39).contains(c): try number()
            case nil: throw fail("unexpected end of the document")
            default: throw fail("expected a value")
            }
        }

        mutating func object(path: String) throws {
            i += 1
            var seen = Set<String>()
            try skipSpace()
            if peek == UInt8(ascii: "}") { i += 1; return }
            while true {
                try skipSpace()
                guard peek == UInt8(ascii: "\"") else {
                    throw fail(peek == UInt8(ascii: "}") ? "trailing comma in \(path.isEmpty ? "the top-level object" : path)" : "expected a key in double quotes")
                }
                let keyStart = i
                let key = try string()
                let keyPath = path.isEmpty ? key : "\(path).\(key)"
                if !seen.insert(key).inserted { i = keyStart; throw fail("duplicate key \(keyPath)") }
                positions[keyPath] = position(of: keyStart)
                try skipSpace()
                try expect(UInt8(ascii: ":"), "':' after key \(keyPath)")
                try skipSpace()
                try value(path: keyPath)
                try skipSpace()
                if peek == UInt8(ascii: ",") { i += 1; continue }
                try expect(UInt8(ascii: "}"), "',' or '}' in \(path.isEmpty ? "the top-level object" : path)")
                return
            }
        }

        mutating func array(path: String) throws {
            i += 1
            try skipSpace()
            if peek == UInt8(ascii: "]") { i += 1; return }
            var n = 0
            while true {
                try skipSpace()
                if peek == UInt8(ascii: "]") { throw fail("trailing comma in \(path)") }
                try value(path: "\(path)[\(n)]")
                n += 1
                try skipSpace()
                if peek == UInt8(ascii: ",") { i += 1; continue }
                try expect(UInt8(ascii: "]"), "',' or ']' in \(path)")
                return
            }
        }

        mutating func string() throws -> String {
            i += 1
            let start = i
            while let c = peek {
                switch c {
                case UInt8(ascii: "\""):
                    i += 1
                    let raw = Data(bytes[(start - 1)..<i])
                    // The escapes were checked below; Foundation decodes them.
                    return (try? JSONDecoder().decode(String.self, from: raw)) ?? String(decoding: bytes[start..<(i - 1)], as: UTF8.self)
                case UInt8(ascii: "\\"):
                    i += 1
                    guard let e = peek, Array("\"\\/bfnrtu".utf8).contains(e) else { throw fail("invalid escape in a string") }
                    i += 1
                    if e == UInt8(ascii: "u") {
                        for _ in 0..<4 {
                            guard let h = peek, (0x30...0x39).contains(h) || (0x41...0x46).contains(h) || (0x61...0x66).contains(h) else {
                                throw fail("invalid \\u escape in a string")
                            }
                            i += 1
                        }
                    }
                case 0..<0x20: throw fail("control character in a string (escape it)")
                default: i += 1
                }
            }
            throw fail("unterminated string")
        }

        mutating func literal(_ word: String) throws {
            guard bytes[i...].starts(with: word.utf8) else { throw fail("expected a value") }
            i += word.utf8.count
        }

        mutating func number() throws {
            func digits() -> Int {
                let start = i
                while let c = peek, (0x30...0x39).contains(c) { i += 1 }
                return i - start
            }
            if peek == UInt8(ascii: "-") { i += 1 }
            if peek == UInt8(ascii: "0") { i += 1 } else if digits() == 0 { throw fail("invalid number") }
            if peek == UInt8(ascii: ".") { i += 1; if digits() == 0 { throw fail("invalid number") } }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                i += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
                if digits() == 0 { throw fail("invalid number") }
            }
        }
    }
}
