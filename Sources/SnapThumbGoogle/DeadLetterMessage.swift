import Foundation

/// A refused upload as a message for a dead-letter topic: the original notification's
/// bytes as data (so the object can be found and the message replayed), its attributes,
/// and SnapThumb's verdict as attributes `snapthumb.key`, `snapthumb.code`,
/// `snapthumb.message` (and `snapthumb.object`, `snapthumb.worker`, `snapthumb.messageId`
/// when given). Pub/Sub caps an attribute value at 1024 bytes: longer values are cut at
/// a character boundary and end in "…".
public enum DeadLetterMessage {
    public static let maxAttributeValueBytes = 1024

    public static func make(original: PubSubMessage?, key: String?, code: String, message: String,
                            object: String? = nil, worker: String? = nil) -> OutgoingMessage {
        var attributes = original?.attributes ?? [:]
        var ours: [String: String?] = ["snapthumb.key": key, "snapthumb.code": code, "snapthumb.message": message,
                                       "snapthumb.object": object, "snapthumb.worker": worker]
        if let id = original?.messageID, !id.isEmpty { ours["snapthumb.messageId"] = id }
        for case let (name, value?) in ours { attributes[name] = clip(value) }
        return OutgoingMessage(data: original?.data ?? Data(), attributes: attributes)
    }

    /// `value` in at most 1024 UTF-8 bytes.
    public static func clip(_ value: String) -> String {
        guard value.utf8.count > maxAttributeValueBytes else { return value }
        var out = ""
        var bytes = 0
        let budget = maxAttributeValueBytes - "…".utf8.count
        for character in value {
            let size = character.utf8.count
            if bytes + size > budget { break }
            out.append(character)
            bytes += size
        }
        return out + "…"
    }
}
