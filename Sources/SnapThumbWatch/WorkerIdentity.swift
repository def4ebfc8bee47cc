#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Who this worker is: the host and process, as `<host>.<pid>` unless overridden.
public struct WorkerIdentity: Sendable, Equatable {
    public let id: String
    public let host: String
    public let pid: Int32

    public init(id: String? = nil) {
        host = Self.hostname()
        pid = getpid()
        self.id = id ?? "\(host).\(pid)"
    }

    static func hostname() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name.replacingOccurrences(of: "/", with: "_")
    }

    /// Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else).
    static func isAlive(pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}

/// The lease a worker keeps in `processing/<worker>/.lease`: its host and pid
/// (written once), and a heartbeat (the file's mtime, touched periodically).
struct Lease: Codable, Equatable {
    var worker: String
    var host: String
    var pid: Int32

    static let fileName = ".lease"
}
