import SnapThumbConfig
import SnapThumbGoogle
import SnapThumbQueue

// The tests describe queues by environment maps, as operators do; these resolve each map
// through the configuration layer (`CloudSettings`) as the program does.

extension SQSConfiguration {
    init(queueURL: String, environment: [String: String]) throws {
        try self.init(queueURL: queueURL, cloud: CloudSettings.resolve(environment: environment))
    }
}

extension PubSubClient {
    static func fromEnvironment(_ environment: [String: String], retry: GoogleRetryPolicy) throws -> PubSubClient {
        try configured(CloudSettings.resolve(environment: environment), retry: retry)
    }
}
