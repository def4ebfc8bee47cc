#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbCore
import VipsKit

/// A temporary upload directory and store, and `snapthumb watch` processes run on them.
/// The binary is the one `swift test` built next to the test bundle.
final class WatchHarness {
    let root: String
    var uploads: String { root + "/up" }
    var store: String { root + "/store" }
    var incoming: String { uploads + "/incoming" }
    private var workers: [Worker] = []

    final class Worker {
        let process: SpawnedProcess
        let log: String
        init(process: SpawnedProcess, log: String) {
            self.process = process
            self.log = log
        }
        var pid: Int32 { process.processIdentifier }
        func signal(_ sig: Int32) { process.signal(sig) }
        /// Waits for the process to exit; nil if it is still running at the deadline.
        func waitForExit(seconds: Double) -> Int32? {
            let deadline = Date().addingTimeInterval(seconds)
            while process.isRunning && Date() < deadline { usleep(50_000) }
            if process.isRunning { return nil }
            return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
        }
        var logText: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
    }

    init() throws {
        var template = Array("/tmp/snapthumb-watch-XXXXXX".utf8CString)
        guard let dir = mkdtemp(&template) else { throw SnapError(.io, "mkdtemp failed") }
        root = String(cString: dir)
        try FileManager.default.createDirectory(atPath: incoming, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/staging", withIntermediateDirectories: true)
    }

    deinit {
        for worker in workers where worker.process.isRunning { worker.signal(SIGKILL); _ = worker.waitForExit(seconds: 5) }
        try? FileManager.default.removeItem(atPath: root)
    }

    static var binary: String {
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("snapthumb").path
    }

    /// Starts `snapthumb watch <uploads> --store <store>` with short test timings.
    @discardableResult
    func start(_ extra: [String] = [], settle: String = "500ms", environment: [String: String] = [:]) throws -> Worker {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("SNAPTHUMB_") }
        env.merge(environment) { $1 }
        let worker = try Self.launch(["watch", uploads, "--store", store, "--settle", settle, "--log-level", "debug"] + extra,
                                     log: "\(root)/worker-\(workers.count).log", environment: env)
        workers.append(worker)
        return worker
    }

    /// Starts the built `snapthumb` with `arguments`, its stderr in the file `log` (made
    /// empty), its stdout discarded. Not with Foundation's `Process`: a daemon that lives
    /// through a test must not hold another child's pipes (see `SpawnedProcess`).
    static func launch(_ arguments: [String], log: String, environment: [String: String]? = nil) throws -> Worker {
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        guard let file = FileHandle(forWritingAtPath: log) else { throw SnapError(.io, "cannot open \(log)") }
        let process = try SpawnedProcess(binary, arguments, environment: environment, stdout: .null, stderr: .descriptor(file.fileDescriptor))
        try? file.close()
        return Worker(process: process, log: log)
    }

    /// Maildir style: written in staging/, then renamed into incoming/.
    func drop(_ name: String, _ bytes: [UInt8]) throws {
        let staging = "\(root)/staging/\(name)"
        try Data(bytes).write(to: URL(fileURLWithPath: staging))
        guard rename(staging, "\(incoming)/\(name)") == 0 else { throw SnapError(.io, "rename failed: \(errno)") }
    }

    /// Upload names in a subdirectory (dot-files and error records left out).
    func uploads(in sub: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "\(uploads)/\(sub)")) ?? []
        return names.filter { !$0.hasPrefix(".") && !$0.hasSuffix(".error.json") }.sorted()
    }

    /// Uploads claimed by any worker.
    func claimed() -> [String] {
        let workers = (try? FileManager.default.contentsOfDirectory(atPath: "\(uploads)/processing")) ?? []
        return workers.flatMap { uploads(in: "processing/\($0)") }.sorted()
    }

    /// Keys whose processing was logged as successful, with how often.
    func successes(in workers: [Worker]) -> [String: Int] {
        var counts: [String: Int] = [:]
        for worker in workers {
            for line in worker.logText.split(separator: "\n") where line.contains("snap.result=ok") {
                if let range = line.range(of: "snap.key=") {
                    let key = line[range.upperBound...].prefix(while: { $0 != " " })
                    counts[String(key), default: 0] += 1
                }
            }
        }
        return counts
    }

    /// Runs `snapthumb verify <store>`; returns its exit status.
    func verifyStore() throws -> Int32 {
        try SpawnedProcess(Self.binary, ["verify", store], stdout: .null, stderr: .null).wait().code
    }

    /// Files under `dir` whose names start with `.tmp-` (temp files of the store and the watcher).
    /// Processes whose command line mentions this harness's store: the daemons and
    /// their `snapthumb worker` processes.
    func processesUsingTheStore() -> Int {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return pids.filter { pid in
            guard Int(pid) != nil, let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
            return String(decoding: data, as: UTF8.self).contains(store)
        }.count
    }

    func tempFiles(under dir: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: dir) else { return [] }
        return walker.compactMap { $0 as? String }.filter { ($0 as NSString).lastPathComponent.hasPrefix(".tmp-") }
    }
}

/// Polls `condition` every 100 ms until it holds or `seconds` pass (a generous
/// deadline: the assertion is the condition, not the time).
@discardableResult
func eventually(_ what: Comment, seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation,
                _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(100_000)
    }
    let ok = condition()
    if !ok { Issue.record("not reached within \(Int(seconds)) s: \(what)", sourceLocation: sourceLocation) }
    return ok
}

/// Small, valid, distinct JPEGs made with libvips itself.
enum TestImages {
    static func jpeg(_ seed: Int, width: Int = 48, height: Int = 36) throws -> [UInt8] {
        try Vips.start()
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                rgb[i] = UInt8(truncatingIfNeeded: x * 5 + seed * 37)
                rgb[i + 1] = UInt8(truncatingIfNeeded: y * 7 + seed * 11)
                rgb[i + 2] = UInt8(truncatingIfNeeded: (x + y) * 3 + seed)
            }
        }
        return try VImage.fromRGB(rgb, width: width, height: height).jpeg(quality: 85)
    }

    static func digest(_ bytes: [UInt8]) -> String { "sha256:" + SHA256.hex(bytes) }
}
