@testable import SnapThumbStore
@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing

@testable import SnapThumbCore
@testable import SnapThumbVerify

// MARK: - Manifest schema

/// A manifest as SnapThumb writes it, as a `JSONSerialization`-style tree so tests can mutate it.
private func exampleManifest() -> [String: Any] {
    func digest(_ c: Character) -> String { "sha256:" + String(repeating: c, count: 64) }
    func blob(_ prefix: String, _ c: Character) -> (digest: String, path: String) {
        let hex = prefix + String(repeating: c, count: 62)
        return ("sha256:" + hex, "blobs/sha256/\(prefix)/" + hex)
    }
    let p100 = blob("ab", "2"), p25 = blob("cd", "3"), sq = blob("ef", "4")
    return [
        "key": "2026/11/a.jpg",
        "recipe": [
            "digest": digest("0"), "libvips": "8.14.1", "version": 1,
            "settings": ["square": ["quality": 85]],
        ],
        "schema": "snapthumb.manifest.v1",
        "source": [
            "bytes": 123456, "digest": digest("1"), "height": 1440, "mediaType": "image/jpeg",
            "orientation": 6, "width": 1080,
        ],
        "variants": [
            "pixel100": [
                "budget": 4096, "budgetMode": "bytes", "bytes": 612, "colours": 16, "degraded": false,
                "digest": p100.digest, "dither": false, "encodes": 1, "height": 100,
                "mediaType": "image/png", "palette": "adaptive", "path": p100.path, "width": 100,
            ],
            "pixel25": [
                "budget": NSNull(), "budgetMode": "inline", "bytes": 90, "colours": 8, "degraded": true,
                "digest": p25.digest, "dither": true, "encodes": 3, "height": 25,
                "mediaType": "image/png", "palette": "pico8", "path": p25.path, "width": 25,
            ],
            "square100": [
                "budget": 4096, "budgetMode": "bytes", "bytes": 2900, "degraded": false,
                "digest": sq.digest, "encodes": 2, "height": 100, "mediaType": "image/jpeg",
                "path": sq.path, "quality": 85, "width": 100,
            ],
        ] as [String: Any],
    ]
}

/// Returns `object` with the value at `path` replaced by `value`, or removed when `value` is nil.
private func setting(_ path: [String], to value: Any?, in object: [String: Any]) -> [String: Any] {
    var copy = object
    guard let first = path.first else { return copy }
    if path.count == 1 {
        copy[first] = value
    } else {
        copy[first] = setting(Array(path.dropFirst()), to: value, in: copy[first] as? [String: Any] ?? [:])
    }
    return copy
}

/// Serialises and validates through the `Data` entry point, as a reader of a manifest file would.
private func validateAsData(_ object: [String: Any]) throws -> [String] {
    (try! ManifestSchema.validator()).validate(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
}

@Suite("Manifest schema")
struct ManifestSchemaTests {
    @Test("The example manifest is valid, as an object and as JSON text")
    func exampleIsValid() throws {
        #expect((try! ManifestSchema.validator()).validate(object: exampleManifest()) == [])
        #expect(try validateAsData(exampleManifest()) == [])
    }

    struct Mutation: CustomTestStringConvertible, Sendable {
        let label: String
        let path: [String]
        let value: (any Sendable)?  // nil removes the field
        let expected: String  // the one message the mutation must produce
        var testDescription: String { label }
    }

    static let hex64 = String(repeating: "e", count: 64)

    static let mutations: [Mutation] = [
        Mutation(label: "missing required field", path: ["source", "width"], value: nil,
                 expected: "/source/width: required property is missing"),
        Mutation(label: "missing JPEG quality", path: ["variants", "square100", "quality"], value: nil,
                 expected: "/variants/square100/quality: required property is missing"),
        Mutation(label: "missing standard variant", path: ["variants", "pixel25"], value: nil,
                 expected: "/variants/pixel25: required property is missing"),
        Mutation(label: "string where integer expected", path: ["variants", "square100", "bytes"], value: "2900",
                 expected: "/variants/square100/bytes: expected integer, got string"),
        Mutation(label: "bool where integer expected", path: ["source", "width"], value: true,
                 expected: "/source/width: expected integer, got boolean"),
        Mutation(label: "1.5 where integer expected", path: ["source", "height"], value: 1.5,
                 expected: "/source/height: expected integer, got number"),
        Mutation(label: "integer where boolean expected", path: ["variants", "pixel100", "degraded"], value: 0,
                 expected: "/variants/pixel100/degraded: expected boolean, got integer"),
        Mutation(label: "bad digest pattern", path: ["source", "digest"], value: "sha256:" + String(repeating: "A", count: 64),
                 expected: "/source/digest: \"sha256:\(String(repeating: "A", count: 64))\" does not match pattern ^sha256:[0-9a-f]{64}$"),
        Mutation(label: "digest with trailing newline", path: ["recipe", "digest"], value: "sha256:" + hex64 + "\n",
                 expected: "/recipe/digest: string has 72 characters; the maximum is 71"),
        Mutation(label: "path with ..", path: ["variants", "pixel25", "path"], value: "blobs/sha256/../" + hex64,
                 expected: "/variants/pixel25/path: \"blobs/sha256/../\(hex64.prefix(63))… does not match pattern ^blobs/sha256/[0-9a-f]{2}/[0-9a-f]{64}$"),
        Mutation(label: "orientation 9", path: ["source", "orientation"], value: 9,
                 expected: "/source/orientation: 9 is greater than the maximum 8"),
        Mutation(label: "unknown source mediaType", path: ["source", "mediaType"], value: "image/bmp",
                 expected: "/source/mediaType: \"image/bmp\" is not one of [\"image/jpeg\",\"image/png\",\"image/webp\",\"image/heic\",\"image/heif\",\"image/avif\",\"image/gif\"]"),
        Mutation(label: "PNG in the JPEG slot", path: ["variants", "square100", "mediaType"], value: "image/png",
                 expected: "/variants/square100/mediaType: expected \"image/jpeg\", got \"image/png\""),
        Mutation(label: "negative bytes", path: ["source", "bytes"], value: -5,
                 expected: "/source/bytes: -5 is less than the minimum 1"),
        Mutation(label: "zero budget", path: ["variants", "pixel100", "budget"], value: 0,
                 expected: "/variants/pixel100/budget: 0 is less than the minimum 1"),
        Mutation(label: "colours out of range", path: ["variants", "pixel25", "colours"], value: 257,
                 expected: "/variants/pixel25/colours: 257 is greater than the maximum 256"),
        Mutation(label: "unknown budgetMode", path: ["variants", "pixel25", "budgetMode"], value: "base64",
                 expected: "/variants/pixel25/budgetMode: \"base64\" is not one of [\"bytes\",\"inline\"]"),
        Mutation(label: "wrong schema const", path: ["schema"], value: "snapthumb.manifest.v2",
                 expected: "/schema: expected \"snapthumb.manifest.v1\", got \"snapthumb.manifest.v2\""),
        Mutation(label: "recipe.settings not an object", path: ["recipe", "settings"], value: [1, 2],
                 expected: "/recipe/settings: expected object, got array"),
    ]

    @Test("Each mutation fails with one message naming the right pointer", arguments: mutations)
    func mutationFails(_ mutation: Mutation) throws {
        let manifest = setting(mutation.path, to: mutation.value, in: exampleManifest())
        #expect((try! ManifestSchema.validator()).validate(object: manifest) == [mutation.expected])
        #expect(try validateAsData(manifest) == [mutation.expected])
    }

    @Test("Keys that escape the store or carry control characters are rejected", arguments: [
        "../x", "a/../x", "a/..", "..", "/abs", "", "a\nb", "trailing\n", "tab\there", "del\u{7F}", "c1\u{85}",
    ])
    func badKeys(_ key: String) {
        let errors = (try! ManifestSchema.validator()).validate(object: setting(["key"], to: key, in: exampleManifest()))
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("/key: ") == true, "\(errors)")
    }

    @Test("Keys that merely contain dots or non-ASCII are fine", arguments: [
        "a..b", "a/..b/c", "./a", "ünïcödé/ok.jpg", "x",
    ])
    func goodKeys(_ key: String) {
        #expect((try! ManifestSchema.validator()).validate(object: setting(["key"], to: key, in: exampleManifest())) == [])
    }

    @Test("Unknown fields are allowed everywhere, for forward compatibility")
    func unknownFieldsAllowed() throws {
        var manifest = exampleManifest()
        manifest = setting(["addedInV1_1"], to: ["anything": [1, 2]], in: manifest)
        manifest = setting(["source", "exif"], to: ["make": "X"], in: manifest)
        manifest = setting(["recipe", "note"], to: "hi", in: manifest)
        manifest = setting(["variants", "square100", "progressive"], to: true, in: manifest)
        #expect((try! ManifestSchema.validator()).validate(object: manifest) == [])
        #expect(try validateAsData(manifest) == [])
    }

    @Test("2.0 counts as an integer; null budget means no budget")
    func integralDoubleAndNullBudget() {
        var manifest = setting(["source", "height"], to: 1440.0, in: exampleManifest())
        manifest = setting(["variants", "square100", "budget"], to: NSNull(), in: manifest)
        #expect((try! ManifestSchema.validator()).validate(object: manifest) == [])
    }

    @Test("Extra variants must be a valid JPEG or PNG variant")
    func extraVariants() throws {
        let variants = try #require(exampleManifest()["variants"] as? [String: Any])
        let goodExtra = setting(["variants", "png50"], to: variants["pixel25"], in: exampleManifest())
        #expect((try! ManifestSchema.validator()).validate(object: goodExtra) == [])

        let badExtra = setting(["variants", "jpeg200"], to: ["mediaType": "image/jpeg"], in: exampleManifest())
        let errors = (try! ManifestSchema.validator()).validate(object: badExtra)
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("/variants/jpeg200: matches none of the anyOf alternatives") == true)
        #expect(errors.first?.contains("/variants/jpeg200/quality: required property is missing") == true)
    }

    @Test("A document that is not JSON, or not an object, is reported at the root")
    func notAManifest() {
        #expect((try! ManifestSchema.validator()).validate(Data("[1]".utf8)) == [": expected object, got array"])
        let garbage = (try! ManifestSchema.validator()).validate(Data("{".utf8))
        #expect(garbage.count == 1 && garbage[0].hasPrefix(": not valid JSON"))
    }

    @Test("The shared validator can be used from many tasks at once")
    func concurrentUse() async throws {
        let good = try JSONSerialization.data(withJSONObject: exampleManifest())
        let bad = try JSONSerialization.data(withJSONObject: setting(["source", "orientation"], to: 9, in: exampleManifest()))
        let counts = await withTaskGroup(of: Int.self) { group in
            for i in 0..<64 {
                group.addTask { (try! ManifestSchema.validator()).validate(i.isMultiple(of: 2) ? good : bad).count }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(counts.filter { $0 == 0 }.count == 32)
        #expect(counts.filter { $0 == 1 }.count == 32)
    }

    @Test("docs/manifest.v1.schema.json is the schema resource the verifier loads")
    func publishedSchemaMatches() throws {
        // This file is <root>/Tests/<target>/<file>.swift.
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let published = try Data(contentsOf: root.appendingPathComponent("docs/manifest.v1.schema.json"))
        #expect(published == (try ManifestSchema.text()))
    }
}

// MARK: - Validator

private func validator(_ schema: String) throws -> JSONSchemaValidator {
    try JSONSchemaValidator(schema: Data(schema.utf8))
}

@Suite("JSON Schema validator")
struct JSONSchemaValidatorTests {
    @Test("Schemas using unimplemented keywords or bad values are rejected", arguments: [
        ##"{"type": "string", "format": "date-time"}"##,  // unknown keyword
        ##"{"properties": {"a": {"multipleOf": 2}}}"##,  // unknown keyword, nested
        ##"{"$defs": {"a": {"unevaluatedProperties": false}}}"##,  // unknown keyword in a def
        ##"{"type": "text"}"##,  // unknown type name
        ##"{"pattern": "("}"##,  // invalid regex
        ##"{"minLength": -1}"##,
        ##"{"required": "a"}"##,
        ##"{"items": [{"type": "string"}]}"##,  // draft-04 tuple form
        ##"{"$ref": "#/$defs/missing"}"##,
        ##"{"$ref": "other.json#/$defs/a"}"##,
        ##"{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}}"##,  // cycle
        ##"{"properties": {"a": {"$defs": {"b": true}}}}"##,  // nested $defs are unreachable
        ##"{"anyOf": []}"##,
        ##"7"##,
        ##"{"type": "object""##,  // not JSON
    ])
    func rejectsSchema(_ schema: String) {
        #expect(throws: JSONSchemaValidator.SchemaError.self) { try validator(schema) }
    }

    @Test("The unknown keyword is named in the error")
    func unknownKeywordMessage() {
        let error = #expect(throws: JSONSchemaValidator.SchemaError.self) {
            try validator(#"{"properties": {"a": {"format": "email"}}}"#)
        }
        #expect(error?.message == #"schema /properties/a: unsupported keyword "format""#)
    }

    @Test("Annotations are accepted and ignored; recursion through properties is fine")
    func annotationsAndRecursion() throws {
        let v = try validator(#"""
            {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x", "title": "t",
             "description": "d", "examples": [1], "default": 1, "$comment": "c",
             "$ref": "#/$defs/tree",
             "$defs": {"tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}}}
            """#)
        #expect(v.validate(object: ["kids": [["kids": []], ["kids": [[:]]]]]) == [])
        #expect(v.validate(object: ["kids": [["kids": [1]]]]) == ["/kids/0/kids/0: expected object, got integer"])
    }

    /// Linux Foundation casts `NSNumber(1)` to `true` and `true` to `1`, so type checks must not.
    @Test("Booleans are never numbers and numbers are never booleans, however they arrive")
    func booleanNumberBridging() throws {
        let integer = try validator(#"{"type": "integer"}"#)
        let number = try validator(#"{"type": "number"}"#)
        let boolean = try validator(#"{"type": "boolean"}"#)

        let booleans: [Any] = [true, false, NSNumber(value: true), NSNumber(value: false)]
        let numbers: [Any] = [0, 1, Int8(1), UInt64.max, 2.0, NSNumber(value: 1), NSNumber(value: 0),
                              NSNumber(value: Int8(1)), NSNumber(value: UInt8(0)), NSNumber(value: 1.0)]
        for value in booleans {
            #expect(integer.validate(object: value) == [": expected integer, got boolean"], "\(type(of: value))")
            #expect(number.validate(object: value) == [": expected number, got boolean"])
            #expect(boolean.validate(object: value) == [])
        }
        for value in numbers {
            #expect(integer.validate(object: value) == [], "\(type(of: value)) \(value)")
            #expect(number.validate(object: value) == [])
            #expect(boolean.validate(object: value) == [": expected boolean, got integer"], "\(type(of: value)) \(value)")
        }
        // What JSONSerialization itself produces, via both entry points.
        let parsed = try #require(
            try JSONSerialization.jsonObject(with: Data("[true, false, 1, 0, 1.0, 1.5]".utf8)) as? [Any])
        let kinds = try validator(#"{"items": {"type": "boolean"}}"#).validate(object: parsed)
        #expect(kinds == ["/2: expected boolean, got integer", "/3: expected boolean, got integer",
                          "/4: expected boolean, got integer", "/5: expected boolean, got number"])
        #expect(try validator(#"{"items": {"type": "integer"}}"#).validate(Data("[true, 1, 1.0, 1.5]".utf8))
                == ["/0: expected integer, got boolean", "/3: expected integer, got number"])
        // enum/const compare booleans and numbers by JSON type too.
        #expect(try validator(#"{"const": 1}"#).validate(object: true) == [": expected 1, got true"])
        #expect(try validator(#"{"enum": [true]}"#).validate(object: NSNumber(value: 1)) == [": 1 is not one of [true]"])
        #expect(try validator(#"{"const": 1}"#).validate(object: 1.0) == [])
    }

    @Test("Object keywords: properties, required, additionalProperties, patternProperties, propertyNames")
    func objectKeywords() throws {
        let v = try validator(#"""
            {"properties": {"a": {"type": "string"}}, "required": ["a", "b/c"],
             "patternProperties": {"^x-": {"type": "integer"}},
             "propertyNames": {"pattern": "^[a-z0-9/-]+$", "maxLength": 5},
             "additionalProperties": false}
            """#)
        #expect(v.validate(object: ["a": "s", "b/c": NSNull(), "x-1": 3]) == ["/b~1c: property is not allowed"])
        #expect(v.validate(object: ["a": 1, "x-y": "no", "Bad": 0]) == [
            "/b~1c: required property is missing",
            "/a: expected string, got integer",
            #"/Bad: "Bad" does not match pattern ^[a-z0-9/-]+$ (property name)"#,
            "/Bad: property is not allowed",
            "/x-y: expected integer, got string",
        ])
        let schemaValued = try validator(#"{"properties": {"a": true}, "additionalProperties": {"type": "null"}}"#)
        #expect(schemaValued.validate(object: ["a": 1, "b": NSNull(), "c": 2]) == ["/c: expected null, got integer"])
    }

    @Test("Array, string and number keywords")
    func scalarKeywords() throws {
        let array = try validator(#"{"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}"#)
        #expect(array.validate(object: [String]()) == [": array has 0 items; the minimum is 1"])
        #expect(array.validate(object: ["a", "b", 3]) == [": array has 3 items; the maximum is 2",
                                                          "/2: expected string, got integer"])

        // Lengths count code points: "é" as e + combining accent is 2, a flag emoji is 2.
        let string = try validator(#"{"minLength": 2, "maxLength": 3, "pattern": "b"}"#)
        #expect(string.validate(object: "abc") == [])  // search, not whole-string match
        #expect(string.validate(object: "b") == [": string has 1 characters; the minimum is 2"])
        #expect(string.validate(object: "e\u{301}b") == [])
        #expect(string.validate(object: "🇫🇷b") == [])
        #expect(string.validate(object: "abcd") == [": string has 4 characters; the maximum is 3"])
        #expect(string.validate(object: "xy") == [#": "xy" does not match pattern b"#])
        #expect(string.validate(object: 5) == [])  // string keywords ignore other types

        let range = try validator(#"{"minimum": 1, "maximum": 10, "exclusiveMinimum": 2, "exclusiveMaximum": 9.5}"#)
        #expect(range.validate(object: 5) == [])
        #expect(range.validate(object: 2) == [": 2 is not greater than the exclusive minimum 2"])
        #expect(range.validate(object: 0.5) == [": 0.5 is less than the minimum 1",
                                                ": 0.5 is not greater than the exclusive minimum 2"])
        #expect(range.validate(object: 9.5) == [": 9.5 is not less than the exclusive maximum 9.5"])
        #expect(range.validate(object: "20") == [])
    }

    @Test("Combinators: allOf, anyOf, oneOf, if/then/else")
    func combinators() throws {
        let one = try validator(#"{"oneOf": [{"type": "integer"}, {"minimum": 0}]}"#)
        #expect(one.validate(object: -1) == [])
        #expect(one.validate(object: 0.5) == [])
        #expect(one.validate(object: 3) == [": matches oneOf alternatives #0, #1; expected exactly one"])
        #expect(one.validate(object: -0.5) == [
            ": matches none of the oneOf alternatives (#0: : expected integer, got number | #1: : -0.5 is less than the minimum 0)"
        ])

        let any = try validator(#"{"anyOf": [{"type": "string"}, {"type": "null"}]}"#)
        #expect(any.validate(object: NSNull()) == [])
        #expect(any.validate(object: 1).count == 1)

        let all = try validator(#"{"allOf": [{"minimum": 2}, {"maximum": 1}]}"#)
        #expect(all.validate(object: 1.5) == [": 1.5 is less than the minimum 2", ": 1.5 is greater than the maximum 1"])

        let conditional = try validator(#"""
            {"if": {"properties": {"kind": {"const": "jpeg"}}},
             "then": {"required": ["quality"]}, "else": {"required": ["colours"]}}
            """#)
        #expect(conditional.validate(object: ["kind": "jpeg", "quality": 1]) == [])
        #expect(conditional.validate(object: ["kind": "jpeg"]) == ["/quality: required property is missing"])
        #expect(conditional.validate(object: ["kind": "png"]) == ["/colours: required property is missing"])
    }

    @Test("const and enum use JSON equality")
    func equality() throws {
        let v = try validator(#"{"const": {"a": [1, "x", null], "b": {"c": false}}}"#)
        #expect(v.validate(object: ["b": ["c": false], "a": [1.0, "x", NSNull()]]) == [])
        #expect(v.validate(object: ["b": ["c": 0], "a": [1, "x", NSNull()]]).count == 1)
        #expect(try validator(#"{"enum": ["a", 2, null]}"#).validate(object: NSNull()) == [])
        // Strings compare by code point, so a decomposed "é" is not the precomposed one.
        let precomposed = try validator(#"{"const": "\u00e9"}"#)
        #expect(precomposed.validate(object: "\u{E9}") == [])
        #expect(precomposed.validate(object: "e\u{301}").count == 1)
    }

    @Test("Values without a JSON form are reported where they are")
    func nonJSONValues() throws {
        let v = try validator("true")
        #expect(v.validate(object: ["when": ["at": Date()]]) == ["/when/at: not a JSON value (Date)"])
        #expect(try validator("false").validate(object: 1) == [": no value is allowed here"])
    }
}
