import Foundation
import SnapThumbConfig

/// Finds Google credentials the way Google's client libraries do ("Application Default
/// Credentials"), for everything but the Pub/Sub emulator (see `PubSubEndpoint`):
/// 1. `GOOGLE_APPLICATION_CREDENTIALS` names a service-account key file: JWT assertions
///    signed with its key, exchanged at its `token_uri`;
/// 2. otherwise the metadata server (`GCE_METADATA_HOST`, else `metadata.google.internal`),
///    as on Compute Engine, Cloud Run and GKE with Workload Identity.
public enum GoogleCredentials {
    /// `cloud-platform`: Pub/Sub and Cloud Storage alike; the account's IAM roles narrow it.
    public static let defaultScopes = ["https://www.googleapis.com/auth/cloud-platform"]

    /// The token source the environment names. A key file is read and checked here
    /// (a start-up error, `GoogleError.Kind.credentials`, when it is unusable); the metadata
    /// server is first asked when a token is needed.
    public static func tokenSource(cloud: CloudSettings, scopes: [String] = defaultScopes) throws -> any AccessTokenSource {
        if let path = cloud.googleCredentials?.value {
            return ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: path), scopes: scopes)
        }
        return MetadataServerTokenSource(host: cloud.metadataHost?.value ?? MetadataServerTokenSource.defaultHost)
    }
}
