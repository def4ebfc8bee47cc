import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbGoogle
import SnapThumbQueue
import SnapThumbS3

// The tests describe buckets and queues by environment maps, as operators do; these
// resolve each map through the configuration layer (`CloudSettings`) as the program does.

extension S3Configuration {
    init(url: String, environment: [String: String], provider: S3Provider? = nil, pathStyle: Bool? = nil) throws {
        try self.init(url: url, cloud: CloudSettings.resolve(environment: environment), provider: provider, pathStyle: pathStyle)
    }
}

extension S3Sources {
    init(url: String, environment: [String: String]) throws {
        try self.init(url: url, cloud: CloudSettings.resolve(environment: environment))
    }
}

extension S3Store {
    static func open(_ url: String, environment: [String: String]) throws -> S3Store {
        try open(url, cloud: CloudSettings.resolve(environment: environment))
    }
}

extension PubSubClient {
    static func fromEnvironment(_ environment: [String: String], retry: GoogleRetryPolicy) throws -> PubSubClient {
        try configured(CloudSettings.resolve(environment: environment), retry: retry)
    }
}
