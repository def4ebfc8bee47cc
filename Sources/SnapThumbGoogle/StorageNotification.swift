import Foundation
import SystemKit

/// An object Cloud Storage says was written (`OBJECT_FINALIZE`): what to read, and
/// what the bytes read must match.
public struct StorageUpload: Sendable, Equatable {
    public let bucket: String
    /// The object's name (not URL-encoded: Cloud Storage sends it as is).
    public let name: String
    /// The generation written: read exactly this one, not whatever is there now.
    public let generation: Int64?
    /// The object's size in bytes (JSON_API_V1 payloads only).
    public let size: Int64?
    /// The MD5 of its bytes (JSON_API_V1; absent for composite objects).
    public let md5: [UInt8]?

    public init(bucket: String, name: String, generation: Int64?, size: Int64?, md5: [UInt8]?) {
        self.bucket = bucket
        self.name = name
        self.generation = generation
        self.size = size
        self.md5 = md5
    }

    /// `gs://bucket/name`, for logs.
    public var location: String { "gs://\(bucket)/\(name)" }

    /// The upload's key under `--source`'s prefix (the object name without it), or nil when
    /// the object is in another bucket, outside the prefix, or names a folder.
    public func key(bucket sourceBucket: String, prefix: String) -> String? {
        guard bucket == sourceBucket, name.hasPrefix(prefix), !name.hasSuffix("/") else { return nil }
        let key = String(name.dropFirst(prefix.count))
        return key.isEmpty ? nil : key
    }
}

/// What a Cloud Storage notification asks of a consumer.
public enum StorageEvent: Sendable, Equatable {
    /// A new object (or a new generation of one): make its thumbnails.
    case upload(StorageUpload)
    /// Nothing to make: acknowledge with one log line giving the reason.
    case ignored(reason: String)
}

/// Cloud Storage's Pub/Sub notifications: attributes `eventType`, `bucketId`, `objectId`,
/// `objectGeneration`, `payloadFormat` (`JSON_API_V1` or `NONE`), and with `JSON_API_V1`
/// the object's resource as JSON in the body (`name`, `bucket`, `generation`, `size`,
/// `md5Hash`; the numbers as strings, as the JSON API writes int64).
public enum StorageNotification {
    /// The event types Cloud Storage sends.
    public static let finalize = "OBJECT_FINALIZE"
    public static let ignoredTypes: Set<String> = ["OBJECT_DELETE", "OBJECT_ARCHIVE", "OBJECT_METADATA_UPDATE"]

    /// Reads a message. Throws `GoogleError` (`invalid`) for a message that is not a
    /// Cloud Storage notification or contradicts itself (a consumer dead-letters it);
    /// returns `.ignored` for the events that make nothing.
    public static func parse(_ message: PubSubMessage) throws -> StorageEvent {
        let attributes = message.attributes
        let id = message.messageID.isEmpty ? "a message" : "message \(message.messageID)"
        guard let eventType = attributes["eventType"] else {
            throw GoogleError(.invalid, "\(id): not a Cloud Storage notification (no eventType attribute)")
        }
        guard eventType == finalize else {
            let what = attributes["objectId"].map { " for gs://\(attributes["bucketId"] ?? "?")/\($0)" } ?? ""
            if ignoredTypes.contains(eventType) { return .ignored(reason: "\(eventType)\(what): only OBJECT_FINALIZE makes thumbnails") }
            return .ignored(reason: "unknown event type \(eventType)\(what)")
        }
        guard let bucket = attributes["bucketId"], !bucket.isEmpty, let name = attributes["objectId"], !name.isEmpty else {
            throw GoogleError(.invalid, "\(id): OBJECT_FINALIZE without bucketId and objectId")
        }
        var generation: Int64?
        if let text = attributes["objectGeneration"] {
            guard let value = Int64(text) else { throw GoogleError(.invalid, "\(id): objectGeneration \"\(text)\" is not a number") }
            generation = value
        }
        var size: Int64?
        var md5: [UInt8]?
        let format = attributes["payloadFormat"] ?? (message.data.isEmpty ? "NONE" : "JSON_API_V1")
        switch format {
        case "NONE":
            break
        case "JSON_API_V1":
            guard let object = (try? JSONSerialization.jsonObject(with: message.data)) as? [String: Any] else {
                throw GoogleError(.invalid, "\(id): payloadFormat JSON_API_V1 but the body is not a JSON object")
            }
            // The attributes and the body must name the same object and generation.
            if let bodyName = object["name"] as? String, bodyName != name {
                throw GoogleError(.invalid, "\(id): objectId and the body's name differ")
            }
            if let bodyBucket = object["bucket"] as? String, bodyBucket != bucket {
                throw GoogleError(.invalid, "\(id): bucketId and the body's bucket differ")
            }
            if let value = object["generation"] {
                guard let bodyGeneration = int64(value) else { throw GoogleError(.invalid, "\(id): the body's generation is not a number") }
                if let generation, generation != bodyGeneration { throw GoogleError(.invalid, "\(id): objectGeneration and the body's generation differ") }
                generation = bodyGeneration
            }
            if let value = object["size"] {
                guard let bytes = int64(value), bytes >= 0 else { throw GoogleError(.invalid, "\(id): the body's size is not a number") }
                size = bytes
            }
            if let text = object["md5Hash"] as? String {
                guard let digest = Data(base64Encoded: text), digest.count == 16 else { throw GoogleError(.invalid, "\(id): md5Hash is not a base64 MD5") }
                md5 = Array(digest)
            }
        default:
            throw GoogleError(.invalid, "\(id): payloadFormat \(format) (expected JSON_API_V1 or NONE)")
        }
        return .upload(StorageUpload(bucket: bucket, name: name, generation: generation, size: size, md5: md5))
    }

    /// The JSON API writes int64 as a string; accept a number too.
    private static func int64(_ value: Any) -> Int64? {
        if let text = value as? String { return Int64(text) }
        if let number = value as? NSNumber { return Int64(exactly: number.doubleValue) }
        return nil
    }
}
