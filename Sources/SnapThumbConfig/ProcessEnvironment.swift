import Foundation

/// The process environment, read here and nowhere else in the product (besides
/// the one launcher of child processes, bench's `ChildProcesses`): every setting
/// that an environment variable can give (`SNAPTHUMB_*`, `AWS_*`, `GOOGLE_*`,
/// `NOTIFY_SOCKET`, …) is resolved from this one snapshot, flags first, then it,
/// then the config file, then the default.
public enum ProcessEnvironment {
    /// The variables this process was started with.
    public static var values: [String: String] { ProcessInfo.processInfo.environment }

    /// One variable, or nil when unset.
    public static func value(_ name: String) -> String? { values[name] }
}
