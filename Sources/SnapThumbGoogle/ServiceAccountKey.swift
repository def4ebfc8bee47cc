import Foundation
import HTTPKit
import SystemKit

/// A service-account key file, as the Cloud console and `gcloud iam service-accounts keys
/// create` write it (`"type": "service_account"`). `description` names the account only.
public struct ServiceAccountKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public let clientEmail: String
    public let privateKeyID: String?
    public let projectID: String?
    /// Where the signed assertion is exchanged for a token (`token_uri`).
    public let tokenURI: URL
    /// PEM text of the PKCS#8 private key: the secret. Only `RS256.sign` reads it.
    let privateKeyPEM: String

    public static let defaultTokenURI = URL(string: "https://oauth2.googleapis.com/token")!

    /// Reads a key file's JSON. `origin` (the file's path) names it in errors; the key's
    /// contents never appear in them. Checks that the private key can sign.
    public init(json: Data, origin: String) throws {
        guard let object = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any] else {
            throw GoogleError(.credentials, "\(origin): not a JSON object (expected a service-account key file)")
        }
        let type = object["type"] as? String ?? "(none)"
        guard type == "service_account" else {
            throw GoogleError(.credentials, "\(origin): credentials of type \"\(type)\": only service-account keys (\"service_account\") are supported; on Google Cloud leave GOOGLE_APPLICATION_CREDENTIALS unset to use the metadata server")
        }
        guard let email = object["client_email"] as? String, !email.isEmpty else {
            throw GoogleError(.credentials, "\(origin): the key file has no client_email")
        }
        guard let pem = object["private_key"] as? String, !pem.isEmpty else {
            throw GoogleError(.credentials, "\(origin): the key file has no private_key")
        }
        let uriText = object["token_uri"] as? String ?? Self.defaultTokenURI.absoluteString
        guard let uri = URL(string: uriText), let scheme = uri.scheme?.lowercased(), scheme == "https" || scheme == "http", uri.host != nil else {
            throw GoogleError(.credentials, "\(origin): token_uri \"\(uriText)\" is not an http(s) URL")
        }
        clientEmail = email
        privateKeyID = object["private_key_id"] as? String
        projectID = object["project_id"] as? String
        tokenURI = uri
        privateKeyPEM = pem
        do {
            _ = try RS256.sign(Array("probe".utf8), privateKeyPEM: pem)
        } catch {
            throw GoogleError(.credentials, "\(origin): private_key is \(error)")
        }
    }

    /// Reads the key file at `path`.
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot be read" : "does not exist"
            throw GoogleError(.credentials, "GOOGLE_APPLICATION_CREDENTIALS=\(path): the file \(reason)")
        }
        try self.init(json: data, origin: path)
    }

    public var description: String { "service account \(clientEmail)" }
    public var debugDescription: String { "ServiceAccountKey(\(clientEmail), <redacted>)" }

    /// The signed JWT (RFC 7523) that the token endpoint exchanges for an access token:
    /// header `{"alg":"RS256","typ":"JWT","kid":…}`, claims `iss` (the account), `scope`,
    /// `aud` (the token URI), `iat` and `exp` (an hour later, the longest Google accepts).
    public func assertion(scopes: [String], now: Date, lifetime: Int = 3600) throws -> String {
        var header: [String: Any] = ["alg": "RS256", "typ": "JWT"]
        if let privateKeyID, !privateKeyID.isEmpty { header["kid"] = privateKeyID }
        let issuedAt = Int(now.timeIntervalSince1970.rounded(.down))
        let claims: [String: Any] = [
            "iss": clientEmail, "scope": scopes.joined(separator: " "), "aud": tokenURI.absoluteString,
            "iat": issuedAt, "exp": issuedAt + lifetime,
        ]
        let signingInput = try Base64URL.encode(JSONSerialization.data(withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes]))
            + "." + Base64URL.encode(JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys, .withoutEscapingSlashes]))
        do {
            let signature = try RS256.sign(Array(signingInput.utf8), privateKeyPEM: privateKeyPEM)
            return signingInput + "." + Base64URL.encode(Data(signature))
        } catch {
            throw GoogleError(.credentials, "\(self): \(error)")
        }
    }
}

/// Tokens for a service account: a JWT assertion signed with its key, exchanged at its
/// `token_uri` (grant type `urn:ietf:params:oauth:grant-type:jwt-bearer`).
public struct ServiceAccountTokenSource: AccessTokenSource {
    public let key: ServiceAccountKey
    public let scopes: [String]

    public init(key: ServiceAccountKey, scopes: [String] = GoogleCredentials.defaultScopes) {
        self.key = key
        self.scopes = scopes
    }

    public var description: String { "\(key) at \(key.tokenURI.absoluteString)" }

    public func tokenRequest(now: Date) throws -> HTTPRequest {
        let form = "grant_type=" + FormEncoding.encode("urn:ietf:params:oauth:grant-type:jwt-bearer")
            + "&assertion=" + FormEncoding.encode(try key.assertion(scopes: scopes, now: now))
        return HTTPRequest(method: "POST", url: key.tokenURI,
                           headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
                           body: Data(form.utf8))
    }

    public func token(from response: HTTPResponse, now: Date) throws -> AccessToken {
        try TokenResponse.parse(response, from: description, now: now)
    }
}

/// Base64 with the URL-safe alphabet and no padding (RFC 7515's base64url).
public enum Base64URL {
    public static func encode(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }

    public static func decode(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// `application/x-www-form-urlencoded` values: everything but the unreserved characters escaped.
enum FormEncoding {
    static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "0") ... UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
