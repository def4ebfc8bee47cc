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

/// The built `snapthumb consume` against moto's S3 and SQS on 127.0.0.1: the bucket's own
/// event notifications feed the queue, as on AWS.
@Suite("consume: a fleet on bucket events", .serialized, .enabled(if: Repo.motoAvailable))
struct ConsumeTests {
    static let good = ["grey.jpg", "alpha.png", "adobe-rgb.jpg", "gps-tagged.jpg", "display-p3.jpg", "phone-portrait.jpg"]
    static let bad = ["corrupt.jpg", "truncated.jpg", "empty.png"]

    /// The keys of the uploads: some with spaces and `+`, some in sub-directories.
    static func keys(_ count: Int) -> [String] {
        (0..<count).map { i in
            switch i % 4 {
            case 0: return "snap \(i).jpg"
            case 1: return "a+b/snap+\(i).png"
            case 2: return "dir \(i % 3)/x y+z \(i).jpg"
            default: return "plain/\(i).jpg"
            }
        }
    }

    static func consume(_ moto: Moto, queue: String, source: String, store: String, extra: [String] = [], env: [String: String] = [:]) throws -> Daemon {
        try Daemon(["consume", queue, "--source", source, "--store", store, "--jobs", "2", "--log-format", "json"] + extra,
                   environment: moto.environment().merging(env) { $1 })
    }

    static func manifestKeys(_ moto: Moto, bucket: String, prefix: String) throws -> [String] {
        try moto.client(bucket: bucket).list(prefix: prefix + "manifests/").map {
            String($0.key.dropFirst((prefix + "manifests/").count).dropLast(".json".count))
        }
    }

    @Test("two consumers, one killed -9 and restarted: 40 uploads published once, 3 refused to the dead-letter queue, 2 outside --source ignored, the queue drained, SIGTERM exits 0, verify passes")
    func fleet() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, deadLetter) = try moto.makeQueue(uniqueName("snaps"), visibility: 6, maxReceives: 4)
        let dlq = try #require(deadLetter)
        try moto.notify(bucket: uploads, queueURL: queue)
        let source = "s3://\(uploads)/in/", store = "s3://\(thumbs)/v1"

        var a = try Self.consume(moto, queue: queue, source: source, store: store)
        let b = try Self.consume(moto, queue: queue, source: source, store: store)
        defer { _ = a.terminate(within: 5); _ = b.terminate(within: 5) }
        var killedLog = ""

        let client = try moto.client(bucket: uploads)
        let keys = Self.keys(40)
        let badKeys = ["broken 1.jpg", "bad+2/truncated.jpg", "empty 3.png"]
        let samples = Repo.sample("snaps"), bads = Repo.sample("bad")
        func put(_ key: String, _ file: String) throws {
            let body = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
            _ = try client.put(key, body: body, contentType: "application/octet-stream")
        }
        for (i, key) in keys.enumerated() {
            try put("in/" + key, "\(samples)/\(Self.good[i % Self.good.count])")
            if i == 10 {
                Thread.sleep(forTimeInterval: 1)
                a.killHard()
                killedLog = a.log
                a = try Self.consume(moto, queue: queue, source: source, store: store)
            }
            if i < badKeys.count { try put("in/" + badKeys[i], "\(bads)/\(Self.bad[i])") }
        }
        try put("other/outside.jpg", "\(samples)/grey.jpg")
        try put("in-not/outside.jpg", "\(samples)/grey.jpg")

        let drained = try eventually(within: 90, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            let published = try Self.manifestKeys(moto, bucket: thumbs, prefix: "v1/").count
            return visible == 0 && hidden == 0 && published >= keys.count
        }
        let depth = try moto.depth(queue)
        #expect(drained, "queue \(depth); A: \(a.log.suffix(3000))\nB: \(b.log.suffix(3000))")
        #expect(a.terminate() == 0, "\(a.log.suffix(2000))")
        #expect(b.terminate() == 0, "\(b.log.suffix(2000))")

        #expect(Set(try Self.manifestKeys(moto, bucket: thumbs, prefix: "v1/")) == Set(keys))

        // Only our letters (a redrive of a transiently failing message would put the raw event
        // there): the three refused keys, each with its code, nothing from outside --source.
        let letters = try moto.drain(dlq).map { try JSONDecoder().decode(DeadLetter.self, from: Data($0.body.utf8)) }
        #expect(Set(letters.compactMap(\.key)) == Set(badKeys), "\(letters)")
        #expect(letters.allSatisfy { ["corrupt", "unsupported"].contains($0.code) && !$0.message.isEmpty }, "\(letters)")
        #expect(letters.allSatisfy { $0.object?.hasPrefix("s3://\(uploads)/in/") == true })

        let log = killedLog + a.log + b.log
        #expect(log.contains("s3:TestEvent"), "\(log)")
        // Numbers are JSON numbers in the JSON log (docs/operations.md), as watch writes them.
        let lines = log.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let timed = lines.filter { $0["snap.ms"] != nil }
        #expect(!timed.isEmpty && timed.allSatisfy { $0["snap.ms"] is NSNumber }, "\(timed.prefix(3))")
        let started = lines.filter { $0["snap.jobs"] != nil }
        #expect(!started.isEmpty && started.allSatisfy { $0["snap.jobs"] is NSNumber && $0["snap.lease_s"] is NSNumber }, "\(started.prefix(3))")
        #expect(log.contains("other/outside.jpg is outside --source"))
        #expect(log.contains("in-not/outside.jpg is outside --source"))

        let verify = try CloudCLI.run(["verify", store], environment: moto.environment())
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(verify.stderr.contains("40 manifests: ok"), "\(verify.stderr)")

        // Keys agree with a backfill of the same prefix: it finds all 40 published (and the 3 bad ones fail again).
        let backfill = try CloudCLI.run(["backfill", source, "--store", store, "--jobs", "2"], environment: moto.environment())
        #expect(backfill.stderr.contains("40 skipped"), "\(backfill.stderr)")
    }

    @Test("SNS envelopes and EventBridge events are read; SIGTERM releases what is in flight, sd_notify says READY and STOPPING, the metrics pass promtool")
    func envelopesAndDrain() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("forms"), visibility: 30)
        let client = try moto.client(bucket: uploads)
        let sqs = try moto.sqs(queueURL: queue)
        var expected: [String] = []
        for i in 0..<12 {
            let key = "p/form \(i)+x.jpg"
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(Self.good[i % 6])"))))
            _ = try client.put(key, body: bytes, contentType: "image/jpeg")
            expected.append("form \(i)+x.jpg")
            let encoded = key.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "/ ._-")))!.replacingOccurrences(of: " ", with: "+")
            let record = "{\"Records\":[{\"eventName\":\"ObjectCreated:Put\",\"s3\":{\"bucket\":{\"name\":\"\(uploads)\"},\"object\":{\"key\":\"\(encoded)\",\"size\":\(bytes.count)}}}]}"
            switch i % 3 {
            case 0: try sqs.send(body: record)
            case 1:
                let envelope = try JSONSerialization.data(withJSONObject: ["Type": "Notification", "Message": record])
                try sqs.send(body: String(decoding: envelope, as: UTF8.self))
            default:
                try sqs.send(body: "{\"source\":\"aws.s3\",\"detail-type\":\"Object Created\",\"detail\":{\"bucket\":{\"name\":\"\(uploads)\"},\"object\":{\"key\":\"\(key)\",\"size\":\(bytes.count)}}}")
            }
        }
        try sqs.send(body: "not json at all")

        let socketName = "@snapthumb-consume-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let listener = try NotifySocket.Listener(name: socketName)
        let metricsDirectory = Repo.tempDirectory()
        defer { Fixtures.remove(metricsDirectory) }
        let metrics = metricsDirectory + "/consume.prom"
        let env = ["NOTIFY_SOCKET": socketName]
        let first = try Self.consume(moto, queue: queue, source: "s3://\(uploads)/p", store: "s3://\(thumbs)/t",
                                     extra: ["--jobs", "1", "--metrics-file", metrics, "--metrics-interval", "200ms"], env: env)
        var notes: [String] = []
        #expect(eventually(within: 30, every: 0) {
            if let note = listener.receive(timeout: 0.2) { notes.append(note) }
            return notes.contains { $0.hasPrefix("READY=1") }
        }, "\(first.log)")
        #expect(eventually(within: 60) { first.log.contains("\"msg\":\"processed\"") }, "\(first.log)")
        #expect(first.terminate() == 0, "\(first.log)")
        while let note = listener.receive(timeout: 0.2) { notes.append(note) }
        #expect(notes.contains { $0.hasPrefix("STOPPING=1") }, "\(notes)")
        // Released, not hidden: nothing waits out the 30 s visibility timeout.
        let hidden = try moto.depth(queue).hidden
        #expect(hidden == 0, "\(first.log)")

        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("snapthumb_consume_messages_received_total"))
        #expect(text.contains("snapthumb_consume_uploads_published_total"))
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool") {
            let check = try ChildProcess.combined("/usr/bin/promtool", ["check", "metrics"], input: Data(text.utf8))
            #expect(check.status == 0, "\(check.output)\n\(text)")
        }

        let second = try Self.consume(moto, queue: queue, source: "s3://\(uploads)/p", store: "s3://\(thumbs)/t", extra: ["--jobs", "1"])
        #expect(try eventually(within: 60, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            return visible == 0 && hidden == 0
        }, "\(second.log)")
        #expect(second.terminate() == 0)
        #expect(Set(try Self.manifestKeys(moto, bucket: thumbs, prefix: "t/")) == Set(expected))
        // No dead-letter queue: the message that is no event is logged at error level, then deleted.
        #expect((first.log + second.log).contains("there is no dead-letter queue"), "\(first.log)\(second.log)")
    }

    @Test("work that outlasts half the visibility timeout extends it: jobs of several 2 s leases each (the bucket behind a slow proxy), no message is delivered twice")
    func leasesExtended() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("lease"), visibility: 2)
        try moto.notify(bucket: uploads, queueURL: queue)
        let client = try moto.client(bucket: uploads)
        let keys = (0..<4).map { "slow \($0).jpg" }
        for (i, key) in keys.enumerated() {
            _ = try client.put(key, body: [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.sample("snaps/\(Self.good[i % 6])")))), contentType: "image/jpeg")
        }
        // Every bucket request takes 1.2 s: a job (read the source, look for its manifest, write
        // blobs and the manifest) takes several leases. The queue itself is reached directly.
        let proxy = try FaultProxy(upstreamPort: moto.port, latencyMs: 1200)
        let metricsDirectory = Repo.tempDirectory()
        defer { Fixtures.remove(metricsDirectory) }
        let metrics = metricsDirectory + "/lease.prom"
        // One worker holding 3 messages: without extensions, held messages would come back to it
        // (or to anyone) as soon as it asks for more.
        let daemon = try Self.consume(moto, queue: queue, source: "s3://\(uploads)/", store: "s3://\(thumbs)/t",
                                      extra: ["--jobs", "1", "--metrics-file", metrics, "--metrics-interval", "200ms"],
                                      env: ["AWS_ENDPOINT_URL_S3": proxy.endpoint])
        #expect(try eventually(within: 120, every: 0.5) {
            let (visible, hidden) = try moto.depth(queue)
            let published = try Self.manifestKeys(moto, bucket: thumbs, prefix: "t/").count
            return visible == 0 && hidden == 0 && published == keys.count
        }, "\(daemon.log)")
        #expect(daemon.terminate() == 0)
        let log = daemon.log
        #expect(!log.contains("\"snap.result\":\"repeat\""), "a message came back while held: \(log)")
        #expect(!log.contains("already holds"), "\(log)")
        let text = try String(contentsOfFile: metrics, encoding: .utf8)
        #expect(text.contains("snapthumb_consume_redeliveries_total 0"), "\(text)")
        #expect(text.contains("snapthumb_consume_uploads_published_total 4"), "\(text)")
    }

    /// CPU seconds (user + system) a process has used so far, from /proc/PID/stat.
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command name (which may hold spaces) start after its ')'.
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        return Double(Int(fields[11])! + Int(fields[12])!) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    @Test("an idle consumer waits in its long polls without using the CPU (URLSession on Linux spun a core while a request was open)")
    func idleLongPollsCostNoCPU() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (_, thumbs) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("idle"), visibility: 30)
        let consumer = try Self.consume(moto, queue: queue, source: "s3://\(uploads)/in/", store: "s3://\(thumbs)/v1")
        defer { _ = consumer.terminate(within: 10) }
        let pid = consumer.process.processIdentifier
        #expect(eventually(within: 30) { consumer.log.contains("\"msg\":\"consuming\"") }, "\(consumer.log)")
        // Several seconds of nothing to do: one long poll held open by the queue all along.
        let (cpu0, wall0) = (try Self.cpuSeconds(pid), Date())
        Thread.sleep(forTimeInterval: 6)
        let (cpu, wall) = (try Self.cpuSeconds(pid) - cpu0, Date().timeIntervalSince(wall0))
        #expect(consumer.process.isRunning)
        // The spinning client used a whole core here (≈ wall); waiting in poll(2) uses almost none.
        #expect(cpu < 0.25 * wall, "the idle consumer used \(cpu) s of CPU in \(wall) s")
        #expect(consumer.terminate(within: 30) == 0, "\(consumer.log)")
    }

    @Test("start-up checks exit 2 with a sentence: refused signature, no such queue, no such bucket, no credentials, no --source")
    func startupChecks() throws {
        let (moto, uploads) = try Moto.withBucket()
        let (queue, _) = try moto.makeQueue(uniqueName("checks"), visibility: 5)
        let env = moto.environment()
        func run(_ arguments: [String], _ environment: [String: String]) throws -> CloudCLI.Result {
            try CloudCLI.run(["consume"] + arguments, environment: environment)
        }
        let wrongSecret = try run([queue, "--source", "s3://\(uploads)/", "--store", "s3://\(uploads)/t"], moto.environment(secret: "not-the-secret"))
        #expect(wrongSecret.status == 2 && wrongSecret.stderr.contains("the queue") && wrongSecret.stderr.contains("refused"), "\(wrongSecret.stderr)")
        #expect(!wrongSecret.stderr.contains(moto.secretAccessKey) && !wrongSecret.stderr.contains("not-the-secret"))
        let noQueue = try run([queue + "-missing", "--source", "s3://\(uploads)/", "--store", "s3://\(uploads)/t"], env)
        #expect(noQueue.status == 2 && noQueue.stderr.contains("no such queue"), "\(noQueue.stderr)")
        let noBucket = try run([queue, "--source", "s3://no-such-bucket-\(UUID().uuidString.prefix(6).lowercased())/", "--store", "s3://\(uploads)/t"], env)
        #expect(noBucket.status == 2 && noBucket.stderr.contains("--source") && noBucket.stderr.contains("no such bucket"), "\(noBucket.stderr)")
        let noStore = try run([queue, "--source", "s3://\(uploads)/", "--store", "s3://no-such-store-\(UUID().uuidString.prefix(6).lowercased())/t"], env)
        #expect(noStore.status == 2 && noStore.stderr.contains("--store"), "\(noStore.stderr)")
        var noKeys = env
        noKeys["AWS_ACCESS_KEY_ID"] = nil
        let noCredentials = try run([queue, "--source", "s3://\(uploads)/", "--store", "s3://\(uploads)/t"], noKeys)
        #expect(noCredentials.status == 2 && noCredentials.stderr.contains("AWS_ACCESS_KEY_ID"), "\(noCredentials.stderr)")
        let noSource = try run([queue, "--store", "s3://\(uploads)/t"], env)
        #expect(noSource.status == 2 && noSource.stderr.contains("--source"), "\(noSource.stderr)")
        let notS3 = try run([queue, "--source", "/tmp/uploads", "--store", "s3://\(uploads)/t"], env)
        #expect(notS3.status == 2 && notS3.stderr.contains("s3://BUCKET/PREFIX"), "\(notS3.stderr)")
        // A store that accepts an overwrite under the create-only header: exit 2 before any message is taken.
        let proxy = try FaultProxy(upstreamPort: moto.port, misbehaviour: ["--accept-overwrites"])
        try moto.sqs(queueURL: queue).send(body: "{\"Service\":\"Amazon S3\",\"Event\":\"s3:TestEvent\"}")
        let unconditional = try run([queue, "--source", "s3://\(uploads)/", "--store", "s3://\(uploads)/t"], moto.environment(endpoint: proxy.endpoint))
        #expect(unconditional.status == 2 && unconditional.stderr.contains("conditional writes"), "\(unconditional.stderr)")
        #expect(try moto.depth(queue) == (1, 0), "no message was received")
    }
}
