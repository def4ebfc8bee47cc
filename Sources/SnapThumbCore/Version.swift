import Foundation
import VipsKit
import SystemKit

/// SnapThumb's version (how this binary was built: the CLI's BuildInfo.swift). The semantic version lives here and
/// nowhere else: `--version`, `snapthumb version`, manifests (`producer`) and the metrics'
/// `snapthumb_build_info` all read it. Bump it with a CHANGELOG entry.
public enum SnapThumbVersion {
    /// The semantic version (https://semver.org) of this source tree.
    public static let current = "0.9.0"
    /// The libvips this process runs (for build-info metrics).
    public static var libvips: String { Vips.version }
}

/// Which program wrote a manifest. Not part of the recipe: a new SnapThumb version that makes
/// the same bytes keeps the recipe digest, so stores are not redone for a version bump.
public struct Producer: Sendable, Equatable, Codable {
    public var name: String
    public var version: String

    public init(name: String = "snapthumb", version: String = SnapThumbVersion.current) {
        self.name = name
        self.version = version
    }

    public static let current = Producer()
}
