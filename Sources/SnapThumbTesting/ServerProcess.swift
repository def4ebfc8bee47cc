import Foundation

/// A helper process of the tests (moto, RGW, the fault proxy, the Pub/Sub emulator, the
/// fake Google endpoints) that prints one line when it is ready, then runs until its
/// standard input closes, which also happens if the test process dies: nothing outlives
/// the tests, and each stops exactly what it started.
public final class ServerProcess: @unchecked Sendable {  // @unchecked: set up in init, then only read
    public let process = Process()
    private let stdin = Pipe()
    /// What it printed first (`port N`, `host H:P`, …).
    public let firstLine: String

    public init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = stdin
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        let reader = out.fileHandleForReading
        while true {
            let byte = reader.readData(ofLength: 1)
            if byte.isEmpty || byte == Data([0x0A]) { break }
            line += byte
        }
        firstLine = String(decoding: line, as: UTF8.self)
    }

    /// Closes its standard input and waits for it to end.
    public func stop() {
        try? stdin.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    deinit { stop() }
}
