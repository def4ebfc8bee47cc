import Foundation

/// The JSON Schema (draft 2020-12) for `snapthumb.manifest.v1`, the manifest SnapThumb writes
/// for each upload.
///
/// The schema is one file, `Resources/manifest.v1.schema.json` beside this source, shipped as a
/// package resource (`docs/manifest.v1.schema.json` is a link to it). Objects allow unknown
/// properties (forward compatibility), but every field SnapThumb writes is required and typed.
public enum ManifestSchema {
    /// The resource bundle SwiftPM builds next to the executable.
    static let bundleName = "SnapThumb_SnapThumbVerify.resources"
    static let fileName = "manifest.v1.schema.json"

    /// Where the schema is looked for, in order: the resource bundle next to the running
    /// executable (a build, or an install that copied the bundle beside the binary), then
    /// `../share/snapthumb/` from the executable (an FHS install: /usr/local/share/snapthumb).
    /// SwiftPM's own `Bundle.module` would stop the process when the bundle is missing;
    /// `verify` reports that instead.
    public static var searchPaths: [String] {
        // The running binary itself: argv[0] is only a name when a shell found it on PATH
        // (`snapthumb verify …` after an install, or in a container).
        let running = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? ""
        let executable = URL(fileURLWithPath: running).resolvingSymlinksInPath()
        let directories = [executable.deletingLastPathComponent(), Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
        var paths: [String] = []
        for directory in directories {
            paths.append(directory.appendingPathComponent(bundleName).appendingPathComponent(fileName).path)
        }
        paths.append(executable.deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("share/snapthumb").appendingPathComponent(fileName).path)
        var seen = Set<String>()
        return paths.filter { seen.insert($0).inserted }
    }

    /// The schema text, or an error naming every place it was looked for.
    public static func text() throws -> Data {
        for path in searchPaths {
            if let data = FileManager.default.contents(atPath: path) { return data }
        }
        throw SchemaUnavailable(searched: searchPaths)
    }

    /// A validator built from the schema resource (loaded once).
    public static func validator() throws -> JSONSchemaValidator { try cached.get() }

    private static let cached: Result<JSONSchemaValidator, any Error> = Result {
        try JSONSchemaValidator(schema: try text())
    }

    /// The schema resource is missing: the binary was copied without its resource bundle.
    public struct SchemaUnavailable: Error, CustomStringConvertible {
        public let searched: [String]
        public var description: String {
            "the manifest schema (\(ManifestSchema.fileName)) is not installed; copy the folder \(ManifestSchema.bundleName) "
                + "from the build directory next to the snapthumb binary, or the file to <prefix>/share/snapthumb/ "
                + "(looked in: \(searched.joined(separator: ", ")))"
        }
    }
}
