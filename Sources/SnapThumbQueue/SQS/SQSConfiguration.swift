import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbS3

/// Where an SQS queue is and how to sign for it, from its URL and the `AWS_*` settings
/// the AWS tools read (`CloudSettings`).
public struct SQSConfiguration: Sendable, CustomStringConvertible {
    /// The queue's URL as SQS gives it (`https://sqs.<region>.amazonaws.com/<account>/<name>`).
    public let queueURL: String
    /// Where requests go: `AWS_ENDPOINT_URL_SQS`, else `AWS_ENDPOINT_URL`, else the queue URL's scheme and host.
    public let endpoint: URL
    public let region: String
    public let credentials: S3Credentials
    /// Attempts per request, first included (`AWS_MAX_ATTEMPTS`).
    public var maxAttempts = 6

    /// The queue's name (the URL's last path segment).
    public var name: String { queueURL.split(separator: "/").last.map(String.init) ?? queueURL }
    public var description: String { "\(queueURL) (region \(region), endpoint \(endpoint.absoluteString))" }

    /// - Parameter cloud: the keys, `sqsEndpoint` (`AWS_ENDPOINT_URL_SQS` then `AWS_ENDPOINT_URL`),
    ///   `region` (`AWS_REGION` then `AWS_DEFAULT_REGION`; an AWS queue URL's own region wins: a
    ///   request signed for another region is refused) and `maxAttempts`.
    public init(queueURL: String, cloud: CloudSettings) throws {
        guard let parsed = URLComponents(string: queueURL), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", let host = parsed.host, !host.isEmpty,
              parsed.user == nil, parsed.password == nil, parsed.query == nil,
              parsed.path.split(separator: "/").count >= 1 else {
            throw SnapError(.config, "\"\(queueURL)\" is not a queue URL such as https://sqs.eu-west-1.amazonaws.com/123456789012/uploads")
        }
        self.queueURL = queueURL
        guard let key = cloud.accessKeyID?.value, let secret = cloud.secretAccessKey?.value else {
            throw SnapError(.config, "\(queueURL): no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones)")
        }
        credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: cloud.sessionToken?.value)
        if let attempts = cloud.maxAttempts { maxAttempts = attempts }
        // sqs.<region>.amazonaws.com (or the legacy <region>.queue.amazonaws.com).
        let labels = host.lowercased().split(separator: ".").map(String.init)
        var urlRegion: String?
        if host.lowercased().hasSuffix(".amazonaws.com") || host.lowercased().hasSuffix(".amazonaws.com.cn"), labels.count >= 3 {
            urlRegion = labels[0] == "sqs" ? labels[1] : labels[1] == "queue" ? labels[0] : nil
        }
        region = urlRegion ?? cloud.region?.value ?? "us-east-1"
        let endpointText = cloud.sqsEndpoint?.value ?? "\(scheme)://\(host)\(parsed.port.map { ":\($0)" } ?? "")"
        guard let e = URLComponents(string: endpointText), let eScheme = e.scheme?.lowercased(), eScheme == "http" || eScheme == "https",
              let eHost = e.host, !eHost.isEmpty, e.user == nil, e.password == nil else {
            throw SnapError(.config, "SQS endpoint \"\(endpointText)\" is not an http(s)://host[:port] URL")
        }
        var components = URLComponents()
        components.scheme = eScheme
        components.host = eHost
        components.port = e.port
        endpoint = components.url!
    }
}
