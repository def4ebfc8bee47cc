import Foundation
import SnapThumbCore

/// A validator for the subset of JSON Schema (draft 2020-12) that SnapThumb's schemas use.
///
/// Supported keywords: `type`, `properties`, `required`, `additionalProperties`,
/// `patternProperties`, `propertyNames`, `items` (a single schema), `minItems`, `maxItems`,
/// `enum`, `const`, `pattern`, `minLength`, `maxLength`, `minimum`, `maximum`,
/// `exclusiveMinimum`, `exclusiveMaximum`, `$ref` (only `#/$defs/NAME`), `$defs` (only at the
/// root), `allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`, and boolean schemas.
/// The annotations `$schema`, `$id`, `title`, `description`, `examples`, `default` and
/// `$comment` are accepted and ignored. Any other keyword makes ``init(schema:)`` throw, so a
/// schema can never rely on a rule this validator would silently skip.
///
/// Semantics follow the specification where it matters for SnapThumb:
/// - `"integer"` is any number without a fractional part (`2.0` is an integer), and JSON
///   booleans are never numbers, even though Foundation bridges both to `NSNumber`.
/// - `pattern` uses search semantics (unanchored), so schemas anchor with `^…$`. Patterns are
///   compiled with `NSRegularExpression` (ICU syntax, which agrees with ECMA-262 on the usual
///   constructs). As in ICU and Python, `$` also matches before a final line terminator.
/// - String lengths count Unicode scalars (code points), as the specification requires.
public struct JSONSchemaValidator: Sendable {
    /// Why a schema was rejected by ``JSONSchemaValidator/init(schema:)``.
    public struct SchemaError: Error, Sendable, CustomStringConvertible {
        /// A human-readable explanation, naming the schema location when there is one.
        public let message: String
        public var description: String { message }
    }

    private let root: Node
    private let defs: [String: Node]

    /// Parses and checks a schema.
    ///
    /// - Throws: ``SchemaError`` if `schema` is not JSON, uses a keyword this validator does not
    ///   implement, gives a keyword a malformed value (such as an invalid regular expression),
    ///   or has a `$ref` that does not resolve or loops without consuming any of the instance.
    public init(schema: Data) throws {
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: schema, options: [.fragmentsAllowed])
        } catch {
            throw SchemaError(message: "schema is not valid JSON: \(error.localizedDescription)")
        }
        let value: Value
        do {
            value = try Value(parsed, at: "")
        } catch let error as ConversionError {
            throw SchemaError(message: "schema is not valid JSON: \(error.message)")
        }
        var parser = Parser()
        root = try parser.parse(value, at: "", isRoot: true)
        defs = parser.defs
        try Self.checkReferences(root: root, defs: defs, referenced: parser.references)
    }

    /// Validates a JSON document.
    ///
    /// - Returns: `[]` when the document is valid; otherwise one message per problem, each
    ///   starting with the JSON pointer of the offending value, for example
    ///   `"/variants/square100/bytes: expected integer, got string"`. The document root is the
    ///   empty pointer, so messages about the whole document start with `": "`.
    public func validate(_ instance: Data) -> [String] {
        do {
            let parsed = try JSONSerialization.jsonObject(with: instance, options: [.fragmentsAllowed])
            return validate(object: parsed)
        } catch {
            return [": not valid JSON: \(error.localizedDescription)"]
        }
    }

    /// Validates a value as produced by `JSONSerialization` (or built from Swift `String`,
    /// `Bool`, numbers, arrays, `[String: Any]` dictionaries and `NSNull`).
    ///
    /// - Returns: the same messages as ``validate(_:)``. A value that has no JSON
    ///   representation (a `Date`, say) yields a single message naming where it is.
    public func validate(object: Any) -> [String] {
        let value: Value
        do {
            value = try Value(object, at: "")
        } catch let error as ConversionError {
            return ["\(error.pointer): \(error.message)"]
        } catch {
            return [": \(error)"]
        }
        var errors: [String] = []
        check(root, value, at: "", into: &errors)
        return errors
    }
}

// MARK: - JSON values

extension JSONSchemaValidator {
    /// A Sendable JSON value. Integers that fit `Int64` are kept exact; other numbers are doubles.
    fileprivate enum Value: Sendable, Equatable {
        case null
        case bool(Bool)
        case int(Int64)
        case double(Double)
        case string(String)
        case array([Value])
        case object([String: Value])

        /// JSON equality as JSON Schema defines it: numbers compare by value (`1 == 1.0`),
        /// booleans never equal numbers, objects ignore key order.
        static func == (lhs: Value, rhs: Value) -> Bool {
            switch (lhs, rhs) {
            case (.null, .null): return true
            case let (.bool(a), .bool(b)): return a == b
            case let (.int(a), .int(b)): return a == b
            // Swift's == treats canonically equivalent strings as equal; JSON compares code points.
            case let (.string(a), .string(b)): return a.unicodeScalars.elementsEqual(b.unicodeScalars)
            case let (.array(a), .array(b)): return a == b
            case let (.object(a), .object(b)): return a == b
            default:
                if let a = lhs.number, let b = rhs.number { return a == b }
                return false
            }
        }

        var number: Double? {
            switch self {
            case .int(let i): return Double(i)
            case .double(let d): return d
            default: return nil
            }
        }

        var isInteger: Bool {
            switch self {
            case .int: return true
            case .double(let d): return d.isFinite && d.rounded(.towardZero) == d
            default: return false
            }
        }

        /// The JSON Schema type name, using the most specific of "integer" and "number".
        var typeName: String {
            switch self {
            case .null: return "null"
            case .bool: return "boolean"
            case .int, .double: return isInteger ? "integer" : "number"
            case .string: return "string"
            case .array: return "array"
            case .object: return "object"
            }
        }

        /// Compact JSON text for messages (keys sorted so messages are deterministic).
        var json: String {
            switch self {
            case .null: return "null"
            case .bool(let b): return b ? "true" : "false"
            case .int(let i): return String(i)
            case .double(let d): return Format.number(d)
            case .string(let s): return Format.quoted(s)
            case .array(let items): return "[" + items.map(\.json).joined(separator: ",") + "]"
            case .object(let members):
                let body = members.keys.sorted().map { Format.quoted($0) + ":" + members[$0]!.json }
                return "{" + body.joined(separator: ",") + "}"
            }
        }

        /// Converts a `JSONSerialization` object tree (or native Swift equivalents).
        ///
        /// Booleans are told apart from numbers by their dynamic type, never with `as? Bool`:
        /// Foundation will happily cast `NSNumber(1)` to `true` and `true` to `1`.
        /// `JSONSerialization` returns booleans as the shared boolean `NSNumber` instances,
        /// whose class (`__NSCFBoolean` on both Linux and Darwin) differs from that of numbers.
        init(_ any: Any, at pointer: String) throws {
            if any is NSNull {
                self = .null
            } else if type(of: any) == Bool.self, let b = any as? Bool {
                self = .bool(b)
            } else if type(of: any) is NSNumber.Type, let n = any as? NSNumber {
                self = Self.fromNSNumber(n)
            } else if let s = any as? String {
                self = .string(s)
            } else if let i = any as? any BinaryInteger {
                self = Int64(exactly: i).map(Value.int) ?? .double(Double(i))
            } else if let f = any as? any BinaryFloatingPoint {
                let d = Double(f)
                guard d.isFinite else {
                    throw ConversionError(pointer: pointer, message: "\(d) is not a JSON number")
                }
                self = .double(d)
            } else if let members = any as? [String: Any] {
                var result: [String: Value] = [:]
                for (key, member) in members {
                    result[key] = try Value(member, at: pointer + "/" + Format.token(key))
                }
                self = .object(result)
            } else if let items = any as? [Any] {
                self = .array(try items.enumerated().map { try Value($1, at: pointer + "/\($0)") })
            } else {
                throw ConversionError(pointer: pointer, message: "not a JSON value (\(type(of: any)))")
            }
        }

        private static func fromNSNumber(_ n: NSNumber) -> Value {
            // The boolean singletons are their own class; NSNumber(value: 1) is not.
            if type(of: n) == type(of: NSNumber(value: true)) {
                return .bool(n.boolValue)
            }
            switch String(cString: n.objCType) {
            case "f", "d":
                return .double(n.doubleValue)
            case "Q" where n.uint64Value > UInt64(Int64.max):
                return .double(n.doubleValue)
            default:
                return .int(n.int64Value)
            }
        }
    }

    fileprivate struct ConversionError: Error {
        let pointer: String
        let message: String
    }
}

// MARK: - Parsed schema

extension JSONSchemaValidator {
    /// A parsed schema: a boolean schema or a set of keywords.
    fileprivate indirect enum Node: Sendable {
        case always(Bool)
        case keywords(Keywords)
    }

    fileprivate enum TypeName: String, Sendable, CaseIterable {
        case null, boolean, integer, number, string, array, object

        func matches(_ value: Value) -> Bool {
            switch (self, value) {
            case (.null, .null), (.boolean, .bool), (.string, .string),
                (.array, .array), (.object, .object):
                return true
            case (.number, .int), (.number, .double):
                return true
            case (.integer, _):
                return value.isInteger
            default:
                return false
            }
        }
    }

    fileprivate struct Property: Sendable {
        let name: String
        let schema: Node
    }

    fileprivate struct PatternProperty: Sendable {
        let pattern: Pattern
        let schema: Node
    }

    /// A compiled `pattern`; the source is kept for messages.
    fileprivate struct Pattern: Sendable {
        let source: String
        let regex: NSRegularExpression

        func matches(_ string: String) -> Bool {
            let range = NSRange(string.startIndex..., in: string)
            return regex.firstMatch(in: string, options: [], range: range) != nil
        }
    }

    /// The keywords of one schema object. Absent keywords are `nil` (or empty).
    fileprivate struct Keywords: Sendable {
        var types: [TypeName]?
        var properties: [Property] = []  // sorted by name so messages come out in a stable order
        var required: [String] = []
        var additionalProperties: Node?
        var patternProperties: [PatternProperty] = []
        var propertyNames: Node?
        var items: Node?
        var minItems: Int?
        var maxItems: Int?
        var enumValues: [Value]?
        var constValue: Value?
        var pattern: Pattern?
        var minLength: Int?
        var maxLength: Int?
        var minimum: Double?
        var maximum: Double?
        var exclusiveMinimum: Double?
        var exclusiveMaximum: Double?
        var ref: String?
        var allOf: [Node]?
        var anyOf: [Node]?
        var oneOf: [Node]?
        var ifSchema: Node?
        var thenSchema: Node?
        var elseSchema: Node?
    }

    /// Turns a schema `Value` into `Node`s, rejecting anything it does not understand.
    private struct Parser {
        private static let annotations: Set<String> = [
            "$schema", "$id", "title", "description", "examples", "default", "$comment",
        ]

        var defs: [String: Node] = [:]
        /// Every `$ref` target with the schema location that uses it, checked once all defs exist.
        var references: [(name: String, location: String)] = []

        mutating func parse(_ value: Value, at location: String, isRoot: Bool = false) throws -> Node {
            switch value {
            case .bool(let b):
                return .always(b)
            case .object(let members):
                return .keywords(try parseKeywords(members, at: location, isRoot: isRoot))
            default:
                throw fail(location, "a schema must be an object or a boolean, not \(value.typeName)")
            }
        }

        private mutating func parseKeywords(
            _ members: [String: Value], at location: String, isRoot: Bool
        ) throws -> Keywords {
            var k = Keywords()
            for name in members.keys.sorted() {
                let value = members[name]!
                let here = location + "/" + Format.token(name)
                switch name {
                case _ where Self.annotations.contains(name):
                    continue
                case "type":
                    k.types = try parseTypes(value, at: here)
                case "properties":
                    k.properties = try schemaMap(value, at: here).map { Property(name: $0.0, schema: $0.1) }
                case "required":
                    k.required = try stringArray(value, at: here)
                case "additionalProperties":
                    k.additionalProperties = try parse(value, at: here)
                case "patternProperties":
                    k.patternProperties = try schemaMap(value, at: here).map {
                        PatternProperty(pattern: try compile($0.0, at: here), schema: $0.1)
                    }
                case "propertyNames":
                    k.propertyNames = try parse(value, at: here)
                case "items":
                    k.items = try parse(value, at: here)
                case "minItems":
                    k.minItems = try count(value, at: here)
                case "maxItems":
                    k.maxItems = try count(value, at: here)
                case "enum":
                    guard case .array(let options) = value else { throw fail(here, "must be an array") }
                    k.enumValues = options
                case "const":
                    k.constValue = value
                case "pattern":
                    guard case .string(let source) = value else { throw fail(here, "must be a string") }
                    k.pattern = try compile(source, at: here)
                case "minLength":
                    k.minLength = try count(value, at: here)
                case "maxLength":
                    k.maxLength = try count(value, at: here)
                case "minimum":
                    k.minimum = try number(value, at: here)
                case "maximum":
                    k.maximum = try number(value, at: here)
                case "exclusiveMinimum":
                    k.exclusiveMinimum = try number(value, at: here)
                case "exclusiveMaximum":
                    k.exclusiveMaximum = try number(value, at: here)
                case "$ref":
                    k.ref = try parseRef(value, at: here)
                case "$defs":
                    // "#/$defs/NAME" always means the root's $defs, so nested ones would be
                    // unreachable; refuse them rather than silently ignore them.
                    guard isRoot else { throw fail(here, "$defs is only supported at the schema root") }
                    for (defName, schema) in try schemaMap(value, at: here) {
                        defs[defName] = schema
                    }
                case "allOf":
                    k.allOf = try schemaArray(value, at: here)
                case "anyOf":
                    k.anyOf = try schemaArray(value, at: here)
                case "oneOf":
                    k.oneOf = try schemaArray(value, at: here)
                case "if":
                    k.ifSchema = try parse(value, at: here)
                case "then":
                    k.thenSchema = try parse(value, at: here)
                case "else":
                    k.elseSchema = try parse(value, at: here)
                default:
                    throw fail(location, "unsupported keyword \"\(name)\"")
                }
            }
            return k
        }

        private func parseTypes(_ value: Value, at location: String) throws -> [TypeName] {
            let names: [String]
            if case .string(let single) = value {
                names = [single]
            } else {
                names = try stringArray(value, at: location)
            }
            guard !names.isEmpty else { throw fail(location, "must name at least one type") }
            return try names.map { name in
                guard let type = TypeName(rawValue: name) else {
                    throw fail(location, "unknown type \"\(name)\"")
                }
                return type
            }
        }

        private mutating func parseRef(_ value: Value, at location: String) throws -> String {
            let prefix = "#/$defs/"
            guard case .string(let ref) = value, ref.hasPrefix(prefix) else {
                throw fail(location, "only references of the form \"#/$defs/NAME\" are supported")
            }
            let token = String(ref.dropFirst(prefix.count))
            guard !token.isEmpty, !token.contains("/") else {
                throw fail(location, "only references of the form \"#/$defs/NAME\" are supported")
            }
            let name = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            references.append((name, location))
            return name
        }

        private mutating func schemaMap(_ value: Value, at location: String) throws -> [(String, Node)] {
            guard case .object(let members) = value else { throw fail(location, "must be an object") }
            return try members.keys.sorted().map { key in
                (key, try parse(members[key]!, at: location + "/" + Format.token(key)))
            }
        }

        private mutating func schemaArray(_ value: Value, at location: String) throws -> [Node] {
            guard case .array(let items) = value, !items.isEmpty else {
                throw fail(location, "must be a non-empty array of schemas")
            }
            return try items.enumerated().map { try parse($1, at: location + "/\($0)") }
        }

        private func stringArray(_ value: Value, at location: String) throws -> [String] {
            guard case .array(let items) = value else { throw fail(location, "must be an array of strings") }
            return try items.map {
                guard case .string(let s) = $0 else { throw fail(location, "must be an array of strings") }
                return s
            }
        }

        private func count(_ value: Value, at location: String) throws -> Int {
            guard value.isInteger, let d = value.number, d >= 0, d <= Double(Int32.max) else {
                throw fail(location, "must be a non-negative integer")
            }
            return Int(d)
        }

        private func number(_ value: Value, at location: String) throws -> Double {
            guard let d = value.number else { throw fail(location, "must be a number") }
            return d
        }

        private func compile(_ source: String, at location: String) throws -> Pattern {
            do {
                return Pattern(source: source, regex: try NSRegularExpression(pattern: source))
            } catch {
                throw fail(location, "invalid regular expression \(Format.quoted(source))")
            }
        }

        private func fail(_ location: String, _ message: String) -> SchemaError {
            SchemaError(message: "schema \(location.isEmpty ? "root" : location): \(message)")
        }
    }

    /// Rejects `$ref`s to missing defs, and ref cycles that never descend into the instance
    /// (`a` → `b` → `a` through `$ref`, `allOf`, …), which would otherwise recurse forever.
    private static func checkReferences(
        root: Node, defs: [String: Node], referenced: [(name: String, location: String)]
    ) throws {
        for (name, location) in referenced where defs[name] == nil {
            throw SchemaError(message: "schema \(location): $ref target \"#/$defs/\(name)\" does not exist")
        }
        // Edges: def -> defs it applies to the same instance location.
        func sameLocationRefs(_ node: Node) -> [String] {
            guard case .keywords(let k) = node else { return [] }
            let nested = (k.allOf ?? []) + (k.anyOf ?? []) + (k.oneOf ?? [])
                + [k.ifSchema, k.thenSchema, k.elseSchema].compactMap { $0 }
            return (k.ref.map { [$0] } ?? []) + nested.flatMap(sameLocationRefs)
        }
        var finished: Set<String> = []
        func visit(_ name: String, _ path: [String]) throws {
            if let start = path.firstIndex(of: name) {
                let cycle = (path[start...] + [name]).joined(separator: " -> ")
                throw SchemaError(message: "schema $defs: reference cycle \(cycle)")
            }
            guard !finished.contains(name), let node = defs[name] else { return }
            for next in sameLocationRefs(node) { try visit(next, path + [name]) }
            finished.insert(name)
        }
        for name in defs.keys.sorted() { try visit(name, []) }
    }
}

// MARK: - Validation

extension JSONSchemaValidator {
    private func check(_ node: Node, _ value: Value, at pointer: String, into errors: inout [String]) {
        let k: Keywords
        switch node {
        case .always(true):
            return
        case .always(false):
            errors.append("\(pointer): no value is allowed here")
            return
        case .keywords(let keywords):
            k = keywords
        }

        func report(_ message: String) { errors.append("\(pointer): \(message)") }

        if let ref = k.ref, let target = defs[ref] {
            check(target, value, at: pointer, into: &errors)
        }

        if let types = k.types, !types.contains(where: { $0.matches(value) }) {
            // Every other keyword either ignores a wrongly typed value or would only restate
            // this problem, so stop here to keep to one message per problem.
            report("expected \(types.map(\.rawValue).joined(separator: " or ")), got \(value.typeName)")
            return
        }
        if let expected = k.constValue, value != expected {
            report("expected \(expected.json), got \(abbreviated(value))")
        }
        if let options = k.enumValues, !options.contains(value) {
            report("\(abbreviated(value)) is not one of \(abbreviated(.array(options), limit: 200))")
        }

        switch value {
        case .string(let s):
            checkString(s, k, report)
        case .int, .double:
            checkNumber(value, k, report)
        case .array(let items):
            if let min = k.minItems, items.count < min {
                report("array has \(items.count) items; the minimum is \(min)")
            }
            if let max = k.maxItems, items.count > max {
                report("array has \(items.count) items; the maximum is \(max)")
            }
            if let itemSchema = k.items {
                for (index, item) in items.enumerated() {
                    check(itemSchema, item, at: "\(pointer)/\(index)", into: &errors)
                }
            }
        case .object(let members):
            checkObject(members, k, at: pointer, into: &errors)
        case .null, .bool:
            break
        }

        if let all = k.allOf {
            for schema in all { check(schema, value, at: pointer, into: &errors) }
        }
        if let any = k.anyOf {
            let failures = any.map { errorsFor($0, value, at: pointer) }
            if !failures.contains(where: \.isEmpty) {
                report("matches none of the anyOf alternatives (\(describe(failures)))")
            }
        }
        if let one = k.oneOf {
            let failures = one.map { errorsFor($0, value, at: pointer) }
            let matching = failures.indices.filter { failures[$0].isEmpty }
            if matching.isEmpty {
                report("matches none of the oneOf alternatives (\(describe(failures)))")
            } else if matching.count > 1 {
                report("matches oneOf alternatives \(matching.map { "#\($0)" }.joined(separator: ", ")); expected exactly one")
            }
        }
        if let condition = k.ifSchema {
            let branch = errorsFor(condition, value, at: pointer).isEmpty ? k.thenSchema : k.elseSchema
            if let branch { check(branch, value, at: pointer, into: &errors) }
        }
    }

    private func checkString(_ s: String, _ k: Keywords, _ report: (String) -> Void) {
        // JSON Schema measures length in code points, not UTF-16 units or grapheme clusters.
        let length = s.unicodeScalars.count
        if let min = k.minLength, length < min {
            report("string has \(length) characters; the minimum is \(min)")
        }
        if let max = k.maxLength, length > max {
            report("string has \(length) characters; the maximum is \(max)")
        }
        if let pattern = k.pattern, !pattern.matches(s) {
            report("\(abbreviated(.string(s))) does not match pattern \(pattern.source)")
        }
    }

    private func checkNumber(_ value: Value, _ k: Keywords, _ report: (String) -> Void) {
        guard let n = value.number else { return }
        let shown = value.json
        if let min = k.minimum, n < min {
            report("\(shown) is less than the minimum \(Format.number(min))")
        }
        if let max = k.maximum, n > max {
            report("\(shown) is greater than the maximum \(Format.number(max))")
        }
        if let min = k.exclusiveMinimum, n <= min {
            report("\(shown) is not greater than the exclusive minimum \(Format.number(min))")
        }
        if let max = k.exclusiveMaximum, n >= max {
            report("\(shown) is not less than the exclusive maximum \(Format.number(max))")
        }
    }

    private func checkObject(
        _ members: [String: Value], _ k: Keywords, at pointer: String, into errors: inout [String]
    ) {
        // Missing properties are reported at their own pointer, which is what a reader looks for.
        for name in k.required where members[name] == nil {
            errors.append("\(pointer)/\(Format.token(name)): required property is missing")
        }
        for property in k.properties {
            if let member = members[property.name] {
                check(property.schema, member, at: pointer + "/" + Format.token(property.name), into: &errors)
            }
        }
        let declared = Set(k.properties.map(\.name))
        for name in members.keys.sorted() {
            let memberPointer = pointer + "/" + Format.token(name)
            let member = members[name]!
            if let names = k.propertyNames {
                for message in errorsFor(names, .string(name), at: memberPointer) {
                    errors.append("\(message) (property name)")
                }
            }
            var matchedPattern = false
            for entry in k.patternProperties where entry.pattern.matches(name) {
                matchedPattern = true
                check(entry.schema, member, at: memberPointer, into: &errors)
            }
            if let additional = k.additionalProperties, !declared.contains(name), !matchedPattern {
                if case .always(false) = additional {
                    errors.append("\(memberPointer): property is not allowed")
                } else {
                    check(additional, member, at: memberPointer, into: &errors)
                }
            }
        }
    }

    private func errorsFor(_ node: Node, _ value: Value, at pointer: String) -> [String] {
        var errors: [String] = []
        check(node, value, at: pointer, into: &errors)
        return errors
    }

    /// Summarises why each alternative of an `anyOf`/`oneOf` failed, in one line.
    private func describe(_ failures: [[String]]) -> String {
        failures.enumerated()
            .map { "#\($0): " + $1.joined(separator: "; ") }
            .joined(separator: " | ")
    }

    private func abbreviated(_ value: Value, limit: Int = 80) -> String {
        let text = value.json
        return text.count <= limit ? text : String(text.prefix(limit)) + "…"
    }
}

// MARK: - Message formatting

extension JSONSchemaValidator {
    /// Text helpers, namespaced so they cannot clash with anything else in the module.
    fileprivate enum Format {
        /// Escapes one JSON pointer reference token (RFC 6901).
        static func token(_ token: String) -> String {
            token.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
        }

        /// A JSON string literal, for messages.
        static func quoted(_ s: String) -> String { JSONText.quoted(s) }

        /// Prints integral doubles without a fraction, so limits read "minimum 1" rather than "1.0".
        static func number(_ d: Double) -> String {
            if d.rounded(.towardZero) == d, abs(d) < 1e15 { return String(Int64(d)) }
            return String(d)
        }
    }
}
