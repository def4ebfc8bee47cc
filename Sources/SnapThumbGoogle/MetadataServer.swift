import Foundation
import HTTPKit

/// Tokens from the metadata server of a Google Cloud machine (Compute Engine, Cloud Run,
/// GKE with Workload Identity): the default service account's token, asked for with
/// `Metadata-Flavor: Google`, and an answer accepted only if it carries that header too.
public struct MetadataServerTokenSource: AccessTokenSource {
    /// `host[:port]`: `GCE_METADATA_HOST`, else `metadata.google.internal`.
    public let host: String

    public static let defaultHost = "metadata.google.internal"
    public static let tokenPath = "/computeMetadata/v1/instance/service-accounts/default/token"

    public init(host: String = MetadataServerTokenSource.defaultHost) {
        self.host = host
    }

    public var description: String { "the metadata server at \(host)" }

    public func tokenRequest(now: Date) throws -> HTTPRequest {
        guard let url = URL(string: "http://\(host)\(Self.tokenPath)") else {
            throw GoogleError(.credentials, "GCE_METADATA_HOST=\(host): not a host[:port]")
        }
        return HTTPRequest(method: "GET", url: url, headers: [("Metadata-Flavor", "Google")])
    }

    public func token(from response: HTTPResponse, now: Date) throws -> AccessToken {
        // Anything else answering on that name (a captive portal, a proxy) is not to be trusted.
        guard response.header("Metadata-Flavor") == "Google" else {
            throw GoogleError(.credentials, "\(description): the answer (HTTP \(response.status)) is not from a metadata server (no Metadata-Flavor: Google)", status: response.status)
        }
        return try TokenResponse.parse(response, from: description, now: now)
    }
}
