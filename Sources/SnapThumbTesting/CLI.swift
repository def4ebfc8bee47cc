import Foundation

/// Runs the real `snapthumb` binary (the CLI test target builds it; the other
/// test targets find it beside their test bundle, in the same build).
public enum CLI {
    public static var binary: String { Fixtures.builtProduct("snapthumb") }

    public typealias Result = ChildProcess.Result

    public static func run(_ arguments: [String], environment: [String: String] = [:], binary: String = CLI.binary) throws -> Result {
        try ChildProcess.run(binary, arguments, environment: environment)
    }
}
