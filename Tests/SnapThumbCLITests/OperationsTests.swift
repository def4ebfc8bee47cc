@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import VipsKit
import SnapThumbVerify

/// Issue 14: what an operator needs (version, build details, producing version in manifests).
@Suite("Operations", .serialized)
struct OperationsTests {
    @Test("--version prints the one semantic version from Version.swift")
    func versionFlag() throws {
        let result = try CLI.run(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == SnapThumbVersion.current)
        #expect(SnapThumbVersion.current.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?/) != nil)
    }

    @Test("version --json: libraries and build details, as one JSON object")
    func versionJSON() throws {
        let result = try CLI.run(["version", "--json"])
        #expect(result.status == 0)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let info = try JSONDecoder().decode(SnapThumbVersion.Info.self, from: Data(lines[0].utf8))
        #expect(info.version == SnapThumbVersion.current)
        #expect(info.libraries.libvips == Vips.version)
        #expect(info.libraries.libexif.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+/) != nil, "libexif: \(info.libraries.libexif)")
        #expect(info.libraries.libimagequant == Vips.imagequantVersion)
        #expect(info.libraries.zlib == Vips.zlibVersion)
        #expect(info.libraries.libjpeg.first?.isNumber == true)
        #expect(info.build.configuration == "debug" || info.build.configuration == "release")
        #expect(info.build.target.contains("-linux-"))
        #expect(info.build.swift.first?.isNumber == true)
        let object = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any]
        #expect(Set(object?.keys.map { $0 } ?? []) == ["name", "version", "manifestSchema", "pipelineVersion", "libraries", "jpegDecoding", "facePlugin", "build"])
        // The face plugin, found beside the binary in the build (FacePluginTests: when it is not).
        #expect(info.facePlugin.present && info.facePlugin.path?.hasSuffix("/libSnapThumbFaces.so") == true, "\(info.facePlugin)")
        // Whose JPEG decoding runs, and on which libjpeg-turbo (issue 42).
        #expect(info.jpegDecoding.libjpegLoaded == Vips.jpegRuntimeVersion)
        #expect(info.jpegDecoding.ownDecoder == Vips.ownJPEGDecoding)

        let text = try CLI.run(["version"])
        #expect(text.status == 0)
        #expect(text.stdout.hasPrefix("snapthumb \(SnapThumbVersion.current)\n"))
        #expect(text.stdout.contains("libexif \(info.libraries.libexif)"))
        #expect(text.stdout.contains("JPEG decoding: "))
    }

    @Test("manifests name the SnapThumb that wrote them; equal versions still give identical bytes")
    func producer() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let result = try CLI.run(["process", Fixtures.sample("snaps/phone-portrait.jpg"), "--store", store])
        #expect(result.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let producer = object?["producer"] as? [String: String]
        #expect(producer == ["name": "snapthumb", "version": SnapThumbVersion.current])
        #expect((try ManifestSchema.validator()).validate(Data(result.stdout.utf8)) == [])
        let again = try CLI.run(["process", Fixtures.sample("snaps/phone-portrait.jpg"), "--store", store])
        #expect(again.stdout == result.stdout)

        // A manifest from before 0.9.0 (no producer) still decodes and validates.
        var old = object ?? [:]
        old["producer"] = nil
        let oldData = try JSONSerialization.data(withJSONObject: old, options: [.sortedKeys])
        #expect(try Manifest.decode(oldData).producer == nil)
        #expect((try ManifestSchema.validator()).validate(oldData) == [])
        // A producer without a semantic version is refused.
        old["producer"] = ["name": "snapthumb", "version": "latest"]
        #expect((try ManifestSchema.validator()).validate(try JSONSerialization.data(withJSONObject: old)) != [])
    }
}

@Suite("Errors in words")
struct ErrorWordsTests {
    @Test("decoding errors and errno values read as sentences, without Swift type names")
    func words() throws {
        struct Shape: Decodable { var key: String; var size: Int }
        let missing = #expect(throws: DecodingError.self) { try JSONDecoder().decode(Shape.self, from: Data(#"{"size": 1}"#.utf8)) }
        #expect(missing.map(describe) == "missing field key")
        let wrong = #expect(throws: DecodingError.self) { try JSONDecoder().decode(Shape.self, from: Data(#"{"key": "a", "size": "big"}"#.utf8)) }
        #expect(wrong.map(describe) == "field size must be a number")
        #expect(describe(Errno(13)) == "Permission denied")
    }

    @Test("verify names a broken manifest's problem in words")
    func verifyWords() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        try FileManager.default.createDirectory(atPath: store + "/manifests", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: store + "/blobs/sha256", withIntermediateDirectories: true)
        try Data(#"{"schema": "snapthumb.manifest.v1"}"#.utf8).write(to: URL(fileURLWithPath: store + "/manifests/a.jpg.json"))
        let result = try CLI.run(["verify", store])
        #expect(result.status == 1)
        #expect(result.stdout.contains("/key: required property is missing"), "\(result.stdout)")
        #expect(!result.stdout.contains("CodingKeys") && !result.stdout.contains("keyNotFound"))
    }
}
