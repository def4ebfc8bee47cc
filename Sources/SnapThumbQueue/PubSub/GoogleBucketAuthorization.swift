import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbGoogle
import SnapThumbS3

/// Cloud Storage's XML API with Google credentials instead of an HMAC key: when no
/// `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` is set, a bucket's requests carry
/// `Authorization: Bearer <access token>` from the credentials SnapThumbGoogle finds
/// (`GOOGLE_APPLICATION_CREDENTIALS`, else the metadata server). Lives here, not in
/// SnapThumbS3, so that the bucket client never depends on Google's module.
public enum GoogleBucketAuthorization {
    /// Installs ``make(cloud:provider:)`` as the bucket client's fallback
    /// (`snapthumb` does so once at start, for every command and worker process).
    public static func install() { S3BearerAuthorization.install(make) }

    /// Bearer tokens when the settings name Google credentials: a key file in
    /// `GOOGLE_APPLICATION_CREDENTIALS` (or the config file's `google.credentials`), or, for a bucket whose provider is `gcs`, the
    /// metadata server (GKE Workload Identity, Cloud Run, Compute Engine). Nil otherwise
    /// (an S3 bucket without keys stays a `config` error). A key file that cannot be
    /// used is a `config` error naming the file, never its contents.
    @Sendable public static func make(cloud: CloudSettings, provider: S3Provider) throws -> S3BearerAuthorization? {
        guard cloud.googleCredentials != nil || provider == .gcs else { return nil }
        let source: any AccessTokenSource
        do { source = try GoogleCredentials.tokenSource(cloud: cloud) } catch let error as GoogleError { throw error.snapError }
        let tokens = AccessTokenProvider(source: source, logger: Logger(label: "snapthumb.google.auth"))
        return S3BearerAuthorization(source: source.description, header: {
            do { return try tokens.blockingToken().authorization } catch let error as GoogleError { throw error.snapError }
        }, refused: { tokens.invalidate() })
    }
}
