import Foundation
import SnapThumbConfig
import SnapThumbGoogle

// The tests describe credentials by environment maps, as operators do; these resolve
// each map through the configuration layer (`CloudSettings`) as the program does.

extension GoogleCredentials {
    static func tokenSource(environment: [String: String]) throws -> any AccessTokenSource {
        try tokenSource(cloud: CloudSettings.resolve(environment: environment))
    }
}

extension PubSubEndpoint {
    static func resolve(environment: [String: String]) throws -> PubSubEndpoint {
        try resolve(cloud: CloudSettings.resolve(environment: environment))
    }
}

extension PubSubClient {
    static func fromEnvironment(_ environment: [String: String], retry: GoogleRetryPolicy) throws -> PubSubClient {
        try configured(CloudSettings.resolve(environment: environment), retry: retry)
    }
}
