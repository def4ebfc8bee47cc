import Foundation
// TEMPORARY until the schema validator lands.
public struct JSONSchemaValidator: Sendable { public func validate(_ d: Data) -> [String] { [] } }
public enum ManifestSchema { public static let validator = JSONSchemaValidator() }
