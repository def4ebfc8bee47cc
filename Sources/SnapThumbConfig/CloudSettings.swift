import SnapThumbCore

/// One resolved setting: its text and where it came from.
public struct ResolvedSetting: Sendable, Equatable, CustomStringConvertible {
    public let value: String
    public let source: SettingSource

    public init(_ value: String, from source: SettingSource) {
        self.value = value
        self.source = source
    }

    /// `AWS_MAX_ATTEMPTS=0`, `s3.maxAttempts in /etc/snapthumb.json (0)`: for messages.
    public var description: String {
        switch source {
        case .environment(let name): return "\(name)=\(value)"
        case .flag(let name): return "\(name) \(value)"
        case .file, .defaultValue: return "\(source) (\(value))"
        }
    }
}

/// How to reach buckets, queues and Google's services: the variables the AWS and Google
/// tools already read, resolved like every other setting, in one place. For each, the
/// first that is set wins: its environment variables in the order listed (an empty one
/// counts as unset), then the config file's key, then (left to the user of the value) the
/// default. Secrets (keys, tokens) come from the environment only: a config file is not
/// where AWS users keep them, and it is often world-readable.
///
/// | setting | environment | config file |
/// |---|---|---|
/// | `accessKeyID`, `secretAccessKey`, `sessionToken` | `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` | — |
/// | `region` | `AWS_REGION`, `AWS_DEFAULT_REGION` | `s3.region` |
/// | `s3Endpoint` | `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL` | `s3.endpoint` |
/// | `sqsEndpoint` | `AWS_ENDPOINT_URL_SQS`, `AWS_ENDPOINT_URL` | `sqs.endpoint` |
/// | `maxAttempts` | `AWS_MAX_ATTEMPTS` | `s3.maxAttempts` |
/// | `s3Provider` | `SNAPTHUMB_S3_PROVIDER` | `s3.provider` |
/// | `s3PathStyle` | `SNAPTHUMB_S3_PATH_STYLE` | `s3.pathStyle` |
/// | `googleCredentials` | `GOOGLE_APPLICATION_CREDENTIALS` | `google.credentials` |
/// | `metadataHost` | `GCE_METADATA_HOST` | `google.metadataHost` |
/// | `pubsubEmulatorHost` | `PUBSUB_EMULATOR_HOST` | `google.pubsubEmulatorHost` |
///
/// An `s3://` URL's own options (`?provider=gcs&path-style=true`) and the flags that set
/// them win over all of these.
public struct CloudSettings: Sendable, Equatable {
    public var accessKeyID: ResolvedSetting?
    public var secretAccessKey: ResolvedSetting?
    public var sessionToken: ResolvedSetting?
    public var region: ResolvedSetting?
    public var s3Endpoint: ResolvedSetting?
    public var sqsEndpoint: ResolvedSetting?
    /// Attempts per request, the first included, at least 1 (checked when resolved).
    public var maxAttempts: Int?
    public var s3Provider: ResolvedSetting?
    /// `SNAPTHUMB_S3_PATH_STYLE`: 1/true/yes/on or 0/false/no/off (checked when resolved).
    public var s3PathStyle: Bool?
    public var googleCredentials: ResolvedSetting?
    public var metadataHost: ResolvedSetting?
    public var pubsubEmulatorHost: ResolvedSetting?
    /// Where `maxAttempts` and `s3PathStyle` came from, for `shown`.
    private var attemptsSetting: ResolvedSetting?
    private var pathStyleSetting: ResolvedSetting?

    /// Nothing set: every default.
    public init() {}

    /// The config file's cloud sections and the settings each accepts.
    public static let fileSettings: [String: [String]] = [
        "s3": ["endpoint", "region", "provider", "pathStyle", "maxAttempts"],
        "sqs": ["endpoint"],
        "google": ["credentials", "metadataHost", "pubsubEmulatorHost"],
    ]

    /// Every environment variable read here, for `snapthumb config` and the README.
    public static let environmentNames = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                                          "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL",
                                          "AWS_MAX_ATTEMPTS", "SNAPTHUMB_S3_PROVIDER", "SNAPTHUMB_S3_PATH_STYLE",
                                          "GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "PUBSUB_EMULATOR_HOST"]

    /// Resolves every cloud setting from the environment and the config file of `layers`.
    /// Throws a `config` error that names the source of a value that cannot be used.
    public static func resolve(_ layers: ConfigLayers) throws -> CloudSettings {
        func pick(_ names: [String], _ fileKey: (String, String)? = nil) -> ResolvedSetting? {
            layers.lookup(environment: names, file: fileKey.map { [$0] } ?? []).map { ResolvedSetting($0.text, from: $0.source) }
        }
        var s = CloudSettings()
        s.accessKeyID = pick(["AWS_ACCESS_KEY_ID"])
        s.secretAccessKey = pick(["AWS_SECRET_ACCESS_KEY"])
        s.sessionToken = pick(["AWS_SESSION_TOKEN"])
        s.region = pick(["AWS_REGION", "AWS_DEFAULT_REGION"], ("s3", "region"))
        s.s3Endpoint = pick(["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"], ("s3", "endpoint"))
        s.sqsEndpoint = pick(["AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL"], ("sqs", "endpoint"))
        if let attempts = pick(["AWS_MAX_ATTEMPTS"], ("s3", "maxAttempts")) {
            guard let n = Int(attempts.value.trimmingCharacters(in: .whitespaces)), n >= 1 else {
                throw SnapError(.config, "\(attempts): expected a whole number of at least 1")
            }
            s.maxAttempts = n
            s.attemptsSetting = attempts
        }
        s.s3Provider = pick(["SNAPTHUMB_S3_PROVIDER"], ("s3", "provider"))
        if let style = pick(["SNAPTHUMB_S3_PATH_STYLE"], ("s3", "pathStyle")) {
            s.s3PathStyle = try parseSwitch(style.value, source: style.source)
            s.pathStyleSetting = style
        }
        s.googleCredentials = pick(["GOOGLE_APPLICATION_CREDENTIALS"], ("google", "credentials"))
        s.metadataHost = pick(["GCE_METADATA_HOST"], ("google", "metadataHost"))
        s.pubsubEmulatorHost = pick(["PUBSUB_EMULATOR_HOST"], ("google", "pubsubEmulatorHost"))
        return s
    }

    /// The environment alone, no config file (library users and tests).
    public static func resolve(environment: [String: String]) throws -> CloudSettings {
        try resolve(ConfigLayers(flags: [:], environment: environment, file: nil))
    }

    /// The settings `snapthumb config` shows: secrets as `(set)`, never their value.
    public var shown: [(name: String, value: String, source: SettingSource)] {
        func row(_ name: String, _ setting: ResolvedSetting?, secret: Bool = false, default value: String = "(none)") -> (String, String, SettingSource) {
            guard let setting else { return (name, value, .defaultValue) }
            return (name, secret ? "(set)" : setting.value, setting.source)
        }
        return [row("aws.accessKeyId", accessKeyID, secret: true), row("aws.secretAccessKey", secretAccessKey, secret: true),
                row("aws.sessionToken", sessionToken, secret: true), row("s3.region", region, default: "us-east-1"), row("s3.endpoint", s3Endpoint, default: "https://s3.<region>.amazonaws.com"),
                row("sqs.endpoint", sqsEndpoint, default: "the queue URL's host"), row("s3.provider", s3Provider, default: "s3"), row("s3.pathStyle", pathStyleSetting, default: "auto"), row("s3.maxAttempts", attemptsSetting, default: "6"),
                row("google.credentials", googleCredentials),
                row("google.metadataHost", metadataHost, default: "metadata.google.internal"), row("google.pubsubEmulatorHost", pubsubEmulatorHost, default: "(none: Google's service)")]
    }
}
