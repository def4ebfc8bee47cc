#if canImport(Glibc)
import Glibc
#endif
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
@testable import SnapThumbRunner
@testable import SnapThumbWatch
import VipsKit

/// `snapthumb watch` under systemd's `Type=notify`, spoken to through our own datagram socket.
@Suite("systemd notify", .serialized)
struct SystemdNotifyTests {
    /// Collects datagrams until `until` holds for the messages so far, or `seconds` pass.
    private func collect(_ listener: NotifySocket.Listener, seconds: Double, until: ([String]) -> Bool) -> [String] {
        var messages: [String] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline, !until(messages) {
            if let message = listener.receive(timeout: 0.5) { messages.append(message) }
        }
        return messages
    }

    @Test("READY=1 after recovery, WATCHDOG=1 at half WATCHDOG_USEC, STOPPING=1 on SIGTERM (abstract socket)")
    func notifyAbstract() throws {
        try run(socketName: "@snapthumb-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
    }

    @Test("a socket path works as well as an abstract name")
    func notifyPath() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("snapthumb-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try run(socketName: dir + "/notify", extra: ["--log-format", "json"])
    }

    private func run(socketName: String, extra: [String] = []) throws {
        let listener = try NotifySocket.Listener(name: socketName)
        let harness = try WatchHarness()
        // A left-over claim of a dead worker: READY must come only after it went back to incoming/.
        let dead = "\(harness.uploads)/processing/gone-host.999999"
        try FileManager.default.createDirectory(atPath: dead, withIntermediateDirectories: true)
        try Data(try TestImages.jpeg(1)).write(to: URL(fileURLWithPath: dead + "/left.jpg"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: dead)

        let worker = try harness.start(["--worker-id", "w1", "--lease-timeout", "1s"] + extra, environment: [
            "NOTIFY_SOCKET": socketName, "WATCHDOG_USEC": "600000"])  // pings every 0.3 s
        let ready = collect(listener, seconds: 60) { $0.contains { $0.split(separator: "\n").contains("READY=1") } }
        #expect(ready.contains { $0.split(separator: "\n").contains("READY=1") }, "got \(ready)")
        #expect(!ready.contains { $0.contains("WATCHDOG=1") }, "READY comes first")
        #expect(!FileManager.default.fileExists(atPath: dead + "/left.jpg"), "recovery happens before READY=1")

        // Watchdog pings keep coming at about half the interval.
        let pings = collect(listener, seconds: 30) { $0.filter { $0 == "WATCHDOG=1" }.count >= 5 }
        #expect(pings.filter { $0 == "WATCHDOG=1" }.count >= 5, "got \(pings)")

        worker.signal(SIGTERM)
        let stopping = collect(listener, seconds: 30) { $0.contains { $0.split(separator: "\n").contains("STOPPING=1") } }
        #expect(stopping.contains { $0.split(separator: "\n").contains("STOPPING=1") }, "got \(stopping)")
        #expect(worker.waitForExit(seconds: 60) == 0)
        // The dead worker's upload was recovered and processed.
        #expect(harness.uploads(in: "done") == ["left.jpg"])
        if extra.contains("json") {
            // --log-format json: every stderr line of the worker is one JSON object.
            let lines = worker.logText.split(separator: "\n")
            #expect(lines.count >= 3)
            for line in lines {
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object?["ts"] is String && object?["msg"] is String, "\(line)")
            }
            #expect(lines.contains { $0.contains("\"snap.result\":\"ok\"") })
        }
    }
}
