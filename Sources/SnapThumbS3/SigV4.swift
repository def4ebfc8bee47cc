import Foundation
import SystemKit

/// Access keys for AWS Signature Version 4. `description` never shows the secret
/// or the session token (nor the whole key id), so a credential printed by
/// mistake in a log, an error or a report gives nothing away.
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let accessKeyID: String
    public let secretAccessKey: String
    public let sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken?.isEmpty == true ? nil : sessionToken
    }

    public var description: String { "S3Credentials(<redacted>)" }
    public var debugDescription: String { description }
}

/// AWS Signature Version 4, header authentication, with the payload hash in the
/// signature ("signed payload" or the literal `UNSIGNED-PAYLOAD`: the caller's
/// choice, given as `payloadHash`). S3 rules: a path is URI-encoded once and
/// never normalised (`a//b` and `a/./b` are distinct keys).
public struct SigV4Signer: Sendable {
    public let credentials: S3Credentials
    public let region: String
    public let service: String

    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// One request as signed: `path` decoded (it is encoded here), `query` as
    /// decoded name/value pairs, headers as sent (names in any case; duplicates kept).
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(String, String)]
        public var headers: [(String, String)]
        public var payloadHash: String

        public init(method: String, path: String, query: [(String, String)] = [], headers: [(String, String)], payloadHash: String) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// `YYYYMMDD'T'HHMMSS'Z'` in UTC.
    public static func amzDate(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        func two(_ n: Int?) -> String { let s = String(n ?? 0); return s.count < 2 ? "0" + s : s }
        return "\(c.year ?? 1970)\(two(c.month))\(two(c.day))T\(two(c.hour))\(two(c.minute))\(two(c.second))Z"
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters
    /// (and `/` when `keepSlash`), as SigV4 defines it (not as URL APIs do).
    public static func uriEncode(_ string: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }

    /// Header value as canonicalised: outer spaces trimmed, inner runs of spaces collapsed to one.
    static func canonicalValue(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            .trimmingCharacters(in: .whitespaces)
    }

    /// Lower-cased names, sorted; a repeated header's values joined by commas in the order sent.
    static func canonicalHeaders(_ headers: [(String, String)]) -> [(name: String, value: String)] {
        var merged: [String: [String]] = [:]
        for (name, value) in headers { merged[name.lowercased(), default: []].append(canonicalValue(value)) }
        return merged.keys.sorted().map { ($0, merged[$0]!.joined(separator: ",")) }
    }

    public func canonicalRequest(_ request: Request) -> String {
        let encoded: [(name: String, value: String)] = request.query.map {
            (Self.uriEncode($0.0, keepSlash: false), Self.uriEncode($0.1, keepSlash: false))
        }
        let sorted = encoded.sorted { a, b in a.name != b.name ? a.name < b.name : a.value < b.value }
        let query = sorted.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        let headers = Self.canonicalHeaders(request.headers)
        return [
            request.method,
            Self.uriEncode(request.path.isEmpty ? "/" : request.path, keepSlash: true),
            query,
            headers.map { "\($0.name):\($0.value)\n" }.joined(),
            headers.map(\.name).joined(separator: ";"),
            request.payloadHash,
        ].joined(separator: "\n")
    }

    func scope(_ amzDate: String) -> String {
        "\(amzDate.prefix(8))/\(region)/\(service)/aws4_request"
    }

    public func stringToSign(_ request: Request, amzDate: String) -> String {
        ["AWS4-HMAC-SHA256", amzDate, scope(amzDate), SHA256.hex(Array(canonicalRequest(request).utf8))].joined(separator: "\n")
    }

    /// The derived key: HMAC chain over date, region, service and "aws4_request".
    func signingKey(day: String) -> [UInt8] {
        var key = HMACSHA256.authenticate(Array(day.utf8), key: Array("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [region, service, "aws4_request"] { key = HMACSHA256.authenticate(Array(part.utf8), key: key) }
        return key
    }

    public func signature(_ request: Request, amzDate: String) -> String {
        let mac = HMACSHA256.authenticate(Array(stringToSign(request, amzDate: amzDate).utf8), key: signingKey(day: String(amzDate.prefix(8))))
        return mac.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The `Authorization` header's value for a request whose headers already
    /// include `x-amz-date` (and every other header to be signed).
    public func authorization(_ request: Request, amzDate: String) -> String {
        let signed = Self.canonicalHeaders(request.headers).map(\.name).joined(separator: ";")
        return "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope(amzDate)), SignedHeaders=\(signed), Signature=\(signature(request, amzDate: amzDate))"
    }

    /// Adds `x-amz-date`, `x-amz-content-sha256`, the session token (signed, as the
    /// AWS SDKs do for S3) and `Authorization` to a request's headers.
    public func sign(_ request: Request, at date: Date) -> [(String, String)] {
        var request = request
        let amzDate = Self.amzDate(date)
        request.headers.append(("x-amz-date", amzDate))
        request.headers.append(("x-amz-content-sha256", request.payloadHash))
        if let token = credentials.sessionToken { request.headers.append(("x-amz-security-token", token)) }
        return request.headers + [("Authorization", authorization(request, amzDate: amzDate))]
    }
}
