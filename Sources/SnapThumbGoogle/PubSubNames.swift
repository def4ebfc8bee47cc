import Foundation

/// A subscription's full name, `projects/P/subscriptions/S`.
public struct PubSubSubscription: Sendable, Hashable, CustomStringConvertible {
    public let project: String
    public let id: String

    public init(project: String, id: String) throws {
        try PubSubNames.check(project: project, in: "projects/\(project)/subscriptions/\(id)")
        try PubSubNames.check(resource: id, kind: "subscription", in: "projects/\(project)/subscriptions/\(id)")
        self.project = project
        self.id = id
    }

    /// `projects/P/subscriptions/S`.
    public init(name: String) throws {
        let (project, id) = try PubSubNames.split(name, collection: "subscriptions")
        try self.init(project: project, id: id)
    }

    /// gocloud.dev's URL form, as `consume` takes it: `gcppubsub://projects/P/subscriptions/S`,
    /// or the short `gcppubsub://P/S`. Nil when the string is not a `gcppubsub://` URL;
    /// throws (`GoogleError.Kind.invalid`) when it is one but malformed.
    public static func parseURL(_ string: String) throws -> PubSubSubscription? {
        let scheme = "gcppubsub://"
        guard string.lowercased().hasPrefix(scheme) else { return nil }
        let rest = String(string.dropFirst(scheme.count))
        guard !rest.contains("?"), !rest.contains("#") else {
            throw GoogleError(.invalid, "\(string): no query or fragment is taken (gcppubsub://projects/P/subscriptions/S)")
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch parts.count {
        case 4 where parts[0] == "projects" && parts[2] == "subscriptions": return try PubSubSubscription(project: parts[1], id: parts[3])
        case 2: return try PubSubSubscription(project: parts[0], id: parts[1])
        default: throw GoogleError(.invalid, "\(string): expected gcppubsub://projects/P/subscriptions/S")
        }
    }

    public var name: String { "projects/\(project)/subscriptions/\(id)" }
    public var url: String { "gcppubsub://\(name)" }
    public var description: String { name }
}

/// A topic's full name, `projects/P/topics/T`.
public struct PubSubTopic: Sendable, Hashable, CustomStringConvertible {
    public let project: String
    public let id: String

    public init(project: String, id: String) throws {
        try PubSubNames.check(project: project, in: "projects/\(project)/topics/\(id)")
        try PubSubNames.check(resource: id, kind: "topic", in: "projects/\(project)/topics/\(id)")
        self.project = project
        self.id = id
    }

    /// `projects/P/topics/T` (as `--dead-letter-topic` and a `deadLetterPolicy` give it).
    public init(name: String) throws {
        let (project, id) = try PubSubNames.split(name, collection: "topics")
        try self.init(project: project, id: id)
    }

    public var name: String { "projects/\(project)/topics/\(id)" }
    public var description: String { name }
}

/// Pub/Sub's naming rules, checked before a name is put in a request path.
enum PubSubNames {
    static func split(_ name: String, collection: String) throws -> (String, String) {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts[0] == "projects", parts[2] == collection else {
            throw GoogleError(.invalid, "\(name): expected projects/PROJECT/\(collection)/NAME")
        }
        return (parts[1], parts[3])
    }

    /// Project ids: lower-case letters, digits and hyphens (a domain-scoped
    /// `example.com:project` also has dots and a colon).
    static func check(project: String, in name: String) throws {
        guard !project.isEmpty, project.count <= 100,
              project.unicodeScalars.allSatisfy({ $0.isASCII && ("a" ... "z" ~= $0 || "0" ... "9" ~= $0 || "-.:".unicodeScalars.contains($0)) }) else {
            throw GoogleError(.invalid, "\(name): \"\(project)\" is not a project id")
        }
    }

    /// Topic and subscription ids: 3-255 characters, starting with a letter, of letters,
    /// digits and `-_.~+%`, not starting with `goog`.
    static func check(resource id: String, kind: String, in name: String) throws {
        let allowed = "-_.~+%".unicodeScalars
        guard (3 ... 255).contains(id.count), let first = id.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
              !id.lowercased().hasPrefix("goog"),
              id.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || "0" ... "9" ~= $0 || allowed.contains($0)) }) else {
            throw GoogleError(.invalid, "\(name): \"\(id)\" is not a \(kind) id (3-255 letters, digits and -_.~+%, starting with a letter)")
        }
    }

    /// A name as a request path: each segment percent-encoded but for the unreserved characters.
    static func path(_ name: String) -> String {
        name.split(separator: "/", omittingEmptySubsequences: false).map { FormEncoding.encode(String($0)) }.joined(separator: "/")
    }
}
