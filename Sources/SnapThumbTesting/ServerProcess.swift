import Foundation
import SystemKit

/// A helper process of the tests (moto, RGW, the fault proxy, the Pub/Sub emulator, the
/// fake Google endpoints) that prints one line when it is ready, then runs until its
/// standard input closes, which also happens if the test process dies: nothing outlives
/// the tests, and each stops exactly what it started.
public final class ServerProcess: @unchecked Sendable {  // @unchecked: set up in init, then only read
    /// Started without Foundation's `Process`: a server lives as long as the test process,
    /// and one that inherited another child's pipe (Process's race, see `SpawnedProcess`)
    /// would keep that child's reader waiting as long.
    public let process: SpawnedProcess
    /// What it printed first (`port N`, `host H:P`, …).
    public let firstLine: String

    public init(_ executable: String, _ arguments: [String]) throws {
        process = try SpawnedProcess(executable, arguments, stdin: .pipe, stdout: .pipe, stderr: .null)
        var line = Data()
        let reader = process.output!
        while true {
            let byte = reader.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            line += byte
        }
        firstLine = String(decoding: line, as: UTF8.self)
    }

    /// Closes its standard input and waits for it to end.
    public func stop() {
        try? process.input?.close()
        process.waitUntilExit()
    }

    deinit { stop() }
}
