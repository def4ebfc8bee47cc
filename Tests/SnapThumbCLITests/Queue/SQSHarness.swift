#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbTesting
@testable import SnapThumbCore
@testable import SnapThumbQueue
@testable import SnapThumbS3
import VipsKit

/// moto's SQS, beside its S3, on the same loopback server (the test user may use both).
extension Moto {
    /// An SQS client of this server (requests are signed; moto checks the signature).
    func sqs(queueURL: String? = nil, secret: String? = nil) throws -> SQSClient {
        let env = environment(secret: secret)
        return SQSClient(configuration: try SQSConfiguration(queueURL: queueURL ?? "\(endpoint)/123456789012/none", environment: env),
                         retry: S3RetryPolicy(attempts: 3, base: 0.02, cap: 0.2))
    }

    /// A new queue; `deadLetter` adds a redrive policy to a new dead-letter queue after `maxReceives`.
    /// Returns the queue's URL and the dead-letter queue's (if any).
    func makeQueue(_ name: String, visibility: Int, maxReceives: Int? = nil) throws -> (url: String, deadLetter: String?) {
        let client = try sqs()
        var deadLetterURL: String?
        var attributes = ["VisibilityTimeout": "\(visibility)"]
        if let maxReceives {
            let dlq = try client.call("CreateQueue", ["QueueName": "\(name)-dlq"])["QueueUrl"] as! String
            let arn = try client.attributes(of: dlq)["QueueArn"]!
            attributes["RedrivePolicy"] = "{\"deadLetterTargetArn\":\"\(arn)\",\"maxReceiveCount\":\"\(maxReceives)\"}"
            deadLetterURL = dlq
        }
        let url = try client.call("CreateQueue", ["QueueName": name, "Attributes": attributes])["QueueUrl"] as! String
        return (url, deadLetterURL)
    }

    /// Makes `bucket` send its ObjectCreated events to the queue (S3's PutBucketNotificationConfiguration).
    func notify(bucket: String, queueURL: String) throws {
        let arn = try sqs().attributes(of: queueURL)["QueueArn"]!
        let xml = """
        <NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><QueueConfiguration><Id>snaps</Id>\
        <Queue>\(arn)</Queue><Event>s3:ObjectCreated:*</Event></QueueConfiguration></NotificationConfiguration>
        """
        let body = Array(xml.utf8)
        try client(bucket: bucket).send("PUT", key: nil, query: [("notification", "")], body: body, payloadHash: SHA256.hex(body), accept: [200])
    }

    /// Visible and in-flight message counts.
    func depth(_ queueURL: String) throws -> (visible: Int, hidden: Int) {
        let a = try sqs().attributes(of: queueURL)
        return (Int(a["ApproximateNumberOfMessages"] ?? "") ?? -1, Int(a["ApproximateNumberOfMessagesNotVisible"] ?? "") ?? -1)
    }

    /// Every message on a queue, received (and deleted) until it is empty.
    func drain(_ queueURL: String) throws -> [QueueMessage] {
        let client = try sqs(queueURL: queueURL)
        var all: [QueueMessage] = []
        while true {
            let batch = try client.receive(maximum: 10, wait: 0, cancellation: ReceiveCancellation())
            if batch.isEmpty { return all }
            for message in batch { try client.delete(receipt: message.receipt) }
            all += batch
        }
    }
}

/// Waits (bounded) until `condition` holds; false if it never did.
func eventually(within seconds: Double, every interval: Double = 0.25, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: interval)
    }
    return try condition()
}

/// A running `snapthumb consume` (or any long-running snapthumb command), its stderr in a file.
final class Daemon: @unchecked Sendable {
    /// Not Foundation's `Process`: a daemon that lives through a test must not hold
    /// another child's pipes (see `SpawnedProcess`).
    let process: SpawnedProcess
    let arguments: [String]
    let logPath: String

    init(_ arguments: [String], environment: [String: String]) throws {
        self.arguments = arguments
        logPath = NSTemporaryDirectory() + "snapthumb-daemon-\(UUID().uuidString).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        var inherited = ProcessInfo.processInfo.environment
        for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                     "AWS_ENDPOINT_URL_SQS", "AWS_PROFILE", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] { inherited[name] = nil }
        guard let file = FileHandle(forWritingAtPath: logPath) else { throw SnapError(.io, "cannot open \(logPath)") }
        defer { try? file.close() }
        process = try SpawnedProcess(CLI.binary, arguments, environment: inherited.merging(environment) { $1 },
                                     stdout: .null, stderr: .descriptor(file.fileDescriptor))
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, then the exit status (bounded wait: SIGKILL and nil after `seconds`).
    func terminate(within seconds: Double = 60) -> Int32? {
        process.signal(SIGTERM)
        let status = wait(seconds)
        if status != 0 { printCrashReport() }
        return status
    }

    /// Swift's crash report, crashed thread first, on the test's standard error: the
    /// expectations quote only the log's end, where the report's last threads are.
    private func printCrashReport() {
        let log = self.log
        guard let start = log.range(of: "Program crashed") else { return }
        let report = log[start.lowerBound...].prefix(6000)
        FileHandle.standardError.write(Data("\(arguments.first ?? "daemon") crashed:\n\(report)\n".utf8))
    }

    func killHard() {
        process.signal(SIGKILL)
        _ = wait(10)
    }

    func wait(_ seconds: Double) -> Int32? {
        if !eventually(within: seconds, every: 0.05, { !process.isRunning }) {
            process.signal(SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { process.signal(SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// A unique, valid name for a queue or bucket.
func uniqueName(_ base: String) -> String { "\(base)-\(UUID().uuidString.lowercased().prefix(8))" }
