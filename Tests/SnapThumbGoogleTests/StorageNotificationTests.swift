@testable import SystemKit
import Foundation
import Testing
import VipsKit
@testable import SnapThumbGoogle

/// Cloud Storage notifications as Cloud Storage publishes them (attributes and a
/// JSON_API_V1 body, numbers as strings), and the gcppubsub:// URL form.
@Suite struct StorageNotificationTests {
    static let bytes = Array("not really a JPEG, but bytes all the same".utf8)

    /// The message Cloud Storage publishes when `name` is written to `bucket`.
    static func finalize(bucket: String = "flick-app.appspot.com", name: String, generation: Int64 = 1_732_540_000_123_456,
                         bytes: [UInt8] = StorageNotificationTests.bytes) -> PubSubMessage {
        let body: [String: Any] = [
            "kind": "storage#object", "id": "\(bucket)/\(name)/\(generation)", "name": name, "bucket": bucket,
            "generation": "\(generation)", "metageneration": "1", "contentType": "image/jpeg",
            "timeCreated": "2026-11-25T16:00:00.000Z", "updated": "2026-11-25T16:00:00.000Z", "storageClass": "STANDARD",
            "size": "\(bytes.count)", "md5Hash": Data(MD5.digest(bytes)).base64EncodedString(), "crc32c": "AAAAAA==",
            "etag": "CMDi2dHRoYkDEAE=",
        ]
        let attributes = [
            "eventType": "OBJECT_FINALIZE", "bucketId": bucket, "objectId": name, "objectGeneration": "\(generation)",
            "eventTime": "2026-11-25T16:00:00.000000Z", "payloadFormat": "JSON_API_V1",
            "notificationConfig": "projects/_/buckets/\(bucket)/notificationConfigs/1",
        ]
        return PubSubMessage(data: try! JSONSerialization.data(withJSONObject: body), attributes: attributes, messageID: "42")
    }

    @Test func anObjectFinalizeIsAnUpload() throws {
        let event = try StorageNotification.parse(Self.finalize(name: "uploads/2026/a snap+1.jpg"))
        guard case .upload(let upload) = event else { Issue.record("not an upload: \(event)"); return }
        #expect(upload.bucket == "flick-app.appspot.com")
        #expect(upload.name == "uploads/2026/a snap+1.jpg")
        #expect(upload.generation == 1_732_540_000_123_456)
        #expect(upload.size == Int64(Self.bytes.count))
        #expect(upload.md5 == MD5.digest(Self.bytes))
        #expect(upload.location == "gs://flick-app.appspot.com/uploads/2026/a snap+1.jpg")
        #expect(upload.key(bucket: "flick-app.appspot.com", prefix: "uploads/") == "2026/a snap+1.jpg")
        #expect(upload.key(bucket: "flick-app.appspot.com", prefix: "") == "uploads/2026/a snap+1.jpg")
        #expect(upload.key(bucket: "flick-app.appspot.com", prefix: "other/") == nil)
        #expect(upload.key(bucket: "another-bucket", prefix: "uploads/") == nil)
        // Whether bytes read are these is the runner's check (SourceExpectation, WorkerLineTests).
    }

    @Test func withoutAPayloadTheAttributesSuffice() throws {
        let message = PubSubMessage(data: Data(), attributes: ["eventType": "OBJECT_FINALIZE", "bucketId": "b-1", "objectId": "x.jpg",
                                                                "objectGeneration": "7", "payloadFormat": "NONE"])
        #expect(try StorageNotification.parse(message) == .upload(StorageUpload(bucket: "b-1", name: "x.jpg", generation: 7, size: nil, md5: nil)))
        // A composite object has no md5Hash: only the size is checked.
        var body = try JSONSerialization.jsonObject(with: Self.finalize(name: "c.jpg").data) as! [String: Any]
        body["md5Hash"] = nil
        body["size"] = 12 // a number is read too
        let composite = PubSubMessage(data: try JSONSerialization.data(withJSONObject: body), attributes: Self.finalize(name: "c.jpg").attributes)
        guard case .upload(let upload) = try StorageNotification.parse(composite) else { Issue.record("not an upload"); return }
        #expect(upload.md5 == nil)
        #expect(upload.size == 12)
    }

    @Test func otherEventsAreIgnoredWithAReason() throws {
        for type in ["OBJECT_DELETE", "OBJECT_ARCHIVE", "OBJECT_METADATA_UPDATE"] {
            var attributes = Self.finalize(name: "a.jpg").attributes
            attributes["eventType"] = type
            let event = try StorageNotification.parse(PubSubMessage(data: Self.finalize(name: "a.jpg").data, attributes: attributes))
            #expect(event == .ignored(reason: "\(type) for gs://flick-app.appspot.com/a.jpg: only OBJECT_FINALIZE makes thumbnails"))
        }
        let future = try StorageNotification.parse(PubSubMessage(data: Data(), attributes: ["eventType": "OBJECT_TELEPORTED"]))
        #expect(future == .ignored(reason: "unknown event type OBJECT_TELEPORTED"))
    }

    @Test func whatIsNotANotificationOrContradictsItselfIsRefused() throws {
        func refused(_ message: PubSubMessage) -> String? {
            do { _ = try StorageNotification.parse(message); return nil } catch { return (error as? GoogleError)?.message }
        }
        #expect(refused(PubSubMessage(data: Data("{}".utf8), messageID: "9")) == "message 9: not a Cloud Storage notification (no eventType attribute)")
        let good = Self.finalize(name: "a.jpg")
        var attributes = good.attributes
        attributes["objectGeneration"] = "8"
        #expect(refused(PubSubMessage(data: good.data, attributes: attributes))?.contains("generation differ") == true)
        attributes = good.attributes
        attributes["objectId"] = "b.jpg"
        #expect(refused(PubSubMessage(data: good.data, attributes: attributes))?.contains("name differ") == true)
        attributes = good.attributes
        attributes["bucketId"] = nil
        #expect(refused(PubSubMessage(data: good.data, attributes: attributes))?.contains("without bucketId") == true)
        #expect(refused(PubSubMessage(data: Data("[1]".utf8), attributes: good.attributes))?.contains("not a JSON object") == true)
        attributes = good.attributes
        attributes["payloadFormat"] = "XML"
        #expect(refused(PubSubMessage(data: good.data, attributes: attributes))?.contains("payloadFormat XML") == true)
        var body = try JSONSerialization.jsonObject(with: good.data) as! [String: Any]
        body["md5Hash"] = "not base64!"
        #expect(refused(PubSubMessage(data: try JSONSerialization.data(withJSONObject: body), attributes: good.attributes))?.contains("md5Hash") == true)
    }

    @Test func publishTimesAsDates() {
        let expected = Date(timeIntervalSince1970: 1_764_086_748)
        for text in ["2025-11-25T16:05:48Z", "2025-11-25T16:05:48.672Z", "2025-11-25T16:05:48.672123456Z"] {
            #expect(PubSubMessage(data: Data(), publishTime: text).publishDate == expected, "\(text)")
        }
        #expect(PubSubMessage(data: Data(), publishTime: "yesterday").publishDate == nil)
        #expect(PubSubMessage(data: Data()).publishDate == nil)
    }

    @Test func gcppubsubURLs() throws {
        let long = try #require(try PubSubSubscription.parseURL("gcppubsub://projects/flick-prod/subscriptions/snap-uploads"))
        #expect(long.project == "flick-prod")
        #expect(long.id == "snap-uploads")
        #expect(long.name == "projects/flick-prod/subscriptions/snap-uploads")
        #expect(long.url == "gcppubsub://projects/flick-prod/subscriptions/snap-uploads")
        #expect(try PubSubSubscription.parseURL("gcppubsub://flick-prod/snap-uploads") == long)
        #expect(try PubSubSubscription.parseURL("https://sqs.eu-west-1.amazonaws.com/123/snaps") == nil)
        #expect(try PubSubSubscription.parseURL("s3://bucket/x") == nil)
        for bad in ["gcppubsub://projects/flick-prod/topics/snaps", "gcppubsub://projects/P/subscriptions/snaps", "gcppubsub://projects/p/subscriptions/ab",
                    "gcppubsub://projects/p/subscriptions/goog-x", "gcppubsub://projects/p/subscriptions/1abc", "gcppubsub://p/s/x",
                    "gcppubsub://projects/p/subscriptions/snaps?max_recv_batch_size=5", "gcppubsub://projects//subscriptions/snaps"] {
            #expect(throws: GoogleError.self, "\(bad)") { try PubSubSubscription.parseURL(bad) }
        }
        #expect(try PubSubTopic(name: "projects/flick-prod/topics/snap-dead-letters").id == "snap-dead-letters")
        #expect(throws: GoogleError.self) { try PubSubTopic(name: "projects/flick-prod/subscriptions/x-y-z") }
        // A name goes into the path encoded: `%` and `+` are allowed in ids.
        #expect(PubSubNames.path("projects/p-1/topics/a+b%c") == "projects/p-1/topics/a%2Bb%25c")
    }
}
