import Foundation
import SnapThumbCore
import SnapThumbStore

/// What one queue message says happened in a bucket. Independent of the queue that
/// carried it: SQS gives S3 event notifications (direct, in an SNS envelope, or as
/// EventBridge events); a Pub/Sub decoder can give Cloud Storage's the same way.
public enum BucketEvent: Sendable, Equatable {
    /// An object was created (written, copied, or completed as a multipart upload).
    /// `expected`: what the notification announced of it (Cloud Storage: the generation,
    /// the size and MD5), for the worker to read exactly that and check it.
    case objectCreated(bucket: String, key: String, size: Int?, expected: SourceExpectation? = nil, origin: EventOrigin = EventOrigin())
    /// An object-created event (or a message that should be one) that names no object this
    /// consumer can read: a key that is not valid URL-encoding, a record without bucket or key,
    /// a notification that contradicts itself. Refused with `reason` (a dead letter).
    case unusable(bucket: String?, key: String?, reason: String, origin: EventOrigin = EventOrigin())
    /// A test message a bucket sends when notifications are configured (`s3:TestEvent`).
    case test(bucket: String?)
    /// Any other event (a deletion, a restore, a tag change): nothing to make.
    case other(String)
}

/// What identifies one event besides its object, for dead letters and de-duplication.
public struct EventOrigin: Sendable, Equatable, Hashable {
    /// `ObjectCreated:Put`, `Object Created`, `OBJECT_FINALIZE`.
    public var name: String?
    /// When the bucket says it happened, as it wrote it (ISO 8601).
    public var time: String?
    /// The object's version: S3's `versionId` (a versioned bucket), Cloud Storage's generation.
    public var version: String?
    /// S3's `sequencer`: orders the events of one key.
    public var sequencer: String?

    public init(name: String? = nil, time: String? = nil, version: String? = nil, sequencer: String? = nil) {
        self.name = name
        self.time = time
        self.version = version
        self.sequencer = sequencer
    }
}

/// Decodes the bodies that S3 sends, through SQS, about a bucket's objects.
public enum S3EventDecoder {
    /// The events in one message body; nil when the body is none of the known forms
    /// (not JSON, or JSON without `Records`, an SNS `Message`, EventBridge `detail` or a test event).
    ///
    /// - S3 event notifications: `Records[].s3.bucket.name` and `.s3.object.key`, where the key
    ///   is URL-encoded with `+` for a space (`red flower+1.jpg` arrives as `red+flower%2B1.jpg`).
    /// - The same wrapped in an SNS envelope (`"Type": "Notification"`, the notification as a
    ///   JSON string in `Message`), unless the subscription delivers raw messages (then it is the first form).
    /// - EventBridge events (`"source": "aws.s3"`, `"detail-type": "Object Created"`), whose
    ///   `detail.object.key` is the key as it is, not URL-encoded.
    public static func decode(_ body: String) -> [BucketEvent]? {
        guard let data = body.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return decode(object)
    }

    static func decode(_ object: [String: Any]) -> [BucketEvent]? {
        if let records = object["Records"] as? [[String: Any]] {
            return records.map(record)
        }
        if object["Event"] as? String == "s3:TestEvent" {
            return [.test(bucket: object["Bucket"] as? String)]
        }
        if object["Type"] as? String == "Notification", let message = object["Message"] as? String {
            return decode(message)
        }
        if object["source"] as? String == "aws.s3", let detailType = object["detail-type"] as? String,
           let detail = object["detail"] as? [String: Any] {
            guard detailType == "Object Created" else { return [.other("EventBridge \(detailType)")] }
            let bucket = (detail["bucket"] as? [String: Any])?["name"] as? String
            let objectInfo = detail["object"] as? [String: Any]
            let origin = EventOrigin(name: "Object Created", time: object["time"] as? String, version: objectInfo?["version-id"] as? String,
                                     sequencer: objectInfo?["sequencer"] as? String)
            guard let bucket, let objectInfo, let key = objectInfo["key"] as? String else {
                return [.unusable(bucket: bucket, key: nil, reason: "an EventBridge Object Created event without detail.bucket.name and detail.object.key", origin: origin)]
            }
            return [.objectCreated(bucket: bucket, key: key, size: number(objectInfo["size"]), origin: origin)]
        }
        return nil
    }

    private static func record(_ record: [String: Any]) -> BucketEvent {
        let name = record["eventName"] as? String ?? "?"
        let created = name.hasPrefix("ObjectCreated:") || name.hasPrefix("s3:ObjectCreated:")
        let s3 = record["s3"] as? [String: Any]
        let bucket = (s3?["bucket"] as? [String: Any])?["name"] as? String
        let objectInfo = s3?["object"] as? [String: Any]
        let origin = EventOrigin(name: record["eventName"] as? String, time: record["eventTime"] as? String,
                                 version: objectInfo?["versionId"] as? String, sequencer: objectInfo?["sequencer"] as? String)
        guard let bucket, let objectInfo, let encoded = objectInfo["key"] as? String else {
            guard created else { return .other("a record without s3.bucket.name and s3.object.key (\(name))") }
            return .unusable(bucket: bucket, key: nil, reason: "an \(name) record without s3.bucket.name and s3.object.key", origin: origin)
        }
        guard created else { return .other(name) }
        guard let key = decodeKey(encoded) else {
            return .unusable(bucket: bucket, key: encoded, reason: "an \(name) record whose key is not URL-encoded UTF-8 (as S3 writes keys in events): no object can be named by it", origin: origin)
        }
        return .objectCreated(bucket: bucket, key: key, size: number(objectInfo["size"]), origin: origin)
    }

    /// An S3 notification's key: `+` is a space, then percent-decoding (`%2B` is `+`).
    public static func decodeKey(_ encoded: String) -> String? {
        encoded.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    private static func number(_ value: Any?) -> Int? {
        if let n = value as? Int { return n }
        if let n = value as? NSNumber { return n.intValue }
        if let s = value as? String { return Int(s) }
        return nil
    }
}

/// `--source s3://BUCKET/PREFIX`: which objects are uploads, and their keys, by the same
/// rule as `backfill s3://BUCKET/PREFIX` (so a backfill and the queue never disagree on a key).
public struct SourceScope: Sendable, Equatable {
    public let bucket: String
    /// "" or ending in "/".
    public let prefix: String

    public init(bucket: String, prefix: String) {
        self.bucket = bucket
        self.prefix = prefix
    }

    public enum Placement: Sendable, Equatable {
        /// An upload with this key (the object key relative to the prefix).
        case upload(key: String)
        /// Another bucket, or outside the prefix.
        case outside
        /// Under the prefix, but not an upload for backfill either: a "directory" marker
        /// (ends in `/`) or a dot-name in its path.
        case ignored
    }

    public func place(bucket: String, objectKey: String) -> Placement {
        guard bucket == self.bucket, objectKey.hasPrefix(prefix) else { return .outside }
        let relative = String(objectKey.dropFirst(prefix.count))
        if relative.isEmpty || relative.hasSuffix("/") || relative.split(separator: "/").contains(where: { $0.hasPrefix(".") }) {
            return .ignored
        }
        return .upload(key: relative)
    }

    /// `s3://bucket/object-key`: how the bucket's source reader names an object.
    public func path(of objectKey: String) -> String { "s3://\(bucket)/\(objectKey)" }
}
