@testable import SystemKit
import Foundation
import SnapThumbTesting
import HTTPKit
import Logging
import Testing
@testable import SnapThumbGoogle

/// Scripts/fake-google-auth.py on 127.0.0.1: a token endpoint that checks the JWT's
/// signature against the test key's public half, and a metadata server.
final class FakeAuth: @unchecked Sendable {
    let helper: ServerProcess
    let port: Int
    var host: String { "127.0.0.1:\(port)" }
    var tokenURI: String { "http://\(host)/token" }

    init(keys: TestKeys, email: String = "snapthumb@proj-test.iam.gserviceaccount.com", keyID: String = "kid-1",
         lifetime: Int = 3600, failFirst: Int = 0, noFlavor: Bool = false, publicKeyPath: String? = nil, maxSkew: Int = 300,
         revokeFirst: Bool = false) throws {
        var arguments = ["\(Repo.root)/Scripts/fake-google-auth.py", "--public-key", publicKeyPath ?? keys.publicPath, "--client-email", email,
                         "--key-id", keyID, "--lifetime", "\(lifetime)", "--fail-first", "\(failFirst)", "--max-skew", "\(maxSkew)"]
        if noFlavor { arguments.append("--no-flavor") }
        if revokeFirst { arguments.append("--revoke-first") }
        helper = try ServerProcess("/usr/bin/env", ["python3"] + arguments)
        guard helper.firstLine.hasPrefix("port "), let port = Int(helper.firstLine.dropFirst(5)) else {
            helper.stop()
            throw GoogleError(.invalid, "fake-google-auth.py did not start: \(helper.firstLine)")
        }
        self.port = port
    }

    struct Stats: Decodable {
        let issued: Int
        let refused: [String]
        let scopes: [String]
        let pulls_ok: Int
        let pulls_refused: Int
    }

    func stats() throws -> Stats {
        let response = try HTTPTransport().sendBlocking(HTTPRequest(method: "GET", url: URL(string: "http://\(host)/stats")!))
        return try JSONDecoder().decode(Stats.self, from: response.body)
    }
}

/// A clock the test moves.
final class TestClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current = Date()
    var now: Date { lock.lock(); defer { lock.unlock() }; return current }
    func advance(_ seconds: Double) { lock.lock(); current += seconds; lock.unlock() }
}

@Suite struct CredentialsTests {
    static let fastRetry = GoogleRetryPolicy(attempts: 4, base: 0.01, cap: 0.05)

    func keyFile(_ keys: TestKeys, tokenURI: String, keyID: String = "kid-1") throws -> String {
        // Beside the shared keys (one directory for the whole run), not in a directory of its own.
        let path = keys.directory + "/key-\(UUID().uuidString).json"
        try keys.serviceAccountJSON(tokenURI: tokenURI, keyID: keyID).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func theAssertionIsAnRS256JWTWithGooglesClaims() throws {
        let keys = try TestKeys.shared.get()
        let key = try ServiceAccountKey(json: keys.serviceAccountJSON(tokenURI: "https://oauth2.googleapis.com/token"), origin: "key.json")
        let now = Date(timeIntervalSince1970: 1_790_000_000.7)
        let jwt = try key.assertion(scopes: ["https://www.googleapis.com/auth/pubsub", "https://www.googleapis.com/auth/devstorage.read_only"], now: now)
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: #require(Base64URL.decode(parts[0]))) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: #require(Base64URL.decode(parts[1]))) as? [String: Any]
        #expect(header?["alg"] as? String == "RS256")
        #expect(header?["typ"] as? String == "JWT")
        #expect(header?["kid"] as? String == "kid-1")
        #expect(claims?["iss"] as? String == "snapthumb@proj-test.iam.gserviceaccount.com")
        #expect(claims?["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims?["scope"] as? String == "https://www.googleapis.com/auth/pubsub https://www.googleapis.com/auth/devstorage.read_only")
        #expect(claims?["iat"] as? Int == 1_790_000_000)
        #expect(claims?["exp"] as? Int == 1_790_003_600)
        #expect(!parts.joined().contains("="))
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(try keys.opensslVerify(Array((parts[0] + "." + parts[1]).utf8), signature: Array(signature)))
    }

    @Test func theEnvironmentPicksTheSource() throws {
        let keys = try TestKeys.shared.get()
        let path = try keyFile(keys, tokenURI: "https://oauth2.googleapis.com/token")
        let sa = try GoogleCredentials.tokenSource(environment: ["GOOGLE_APPLICATION_CREDENTIALS": path, "GCE_METADATA_HOST": "127.0.0.1:1"])
        #expect((sa as? ServiceAccountTokenSource)?.key.clientEmail == "snapthumb@proj-test.iam.gserviceaccount.com")
        let metadata = try GoogleCredentials.tokenSource(environment: ["GCE_METADATA_HOST": "127.0.0.1:9"])
        #expect((metadata as? MetadataServerTokenSource)?.host == "127.0.0.1:9")
        let onGoogle = try GoogleCredentials.tokenSource(environment: ["GOOGLE_APPLICATION_CREDENTIALS": ""])
        #expect((onGoogle as? MetadataServerTokenSource)?.host == "metadata.google.internal")
        // The emulator needs none; Google's service needs a source.
        #expect(try PubSubEndpoint.resolve(environment: ["PUBSUB_EMULATOR_HOST": "127.0.0.1:8085"]) == PubSubEndpoint(baseURL: URL(string: "http://127.0.0.1:8085")!, authenticated: false))
        #expect(try PubSubEndpoint.resolve(environment: [:]) == .google)
        #expect(throws: GoogleError.self) { try PubSubEndpoint.resolve(environment: ["PUBSUB_EMULATOR_HOST": "http://127.0.0.1:8085/x"]) }
    }

    @Test func unusableKeyFilesSayWhyWithoutTheKey() throws {
        let keys = try TestKeys.shared.get()
        let dir = Repo.tempDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func attempt(_ object: [String: Any]) -> GoogleError? {
            let path = dir + "/\(UUID().uuidString).json"
            try! JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            do { _ = try GoogleCredentials.tokenSource(environment: ["GOOGLE_APPLICATION_CREDENTIALS": path]); return nil } catch { return error as? GoogleError }
        }
        let missing = #expect(throws: GoogleError.self) { try GoogleCredentials.tokenSource(environment: ["GOOGLE_APPLICATION_CREDENTIALS": dir + "/nope.json"]) }
        #expect(missing?.kind == .credentials)
        #expect(missing?.message.contains("does not exist") == true)
        let user = attempt(["type": "authorized_user", "client_id": "x", "client_secret": "y", "refresh_token": "z"])
        #expect(user?.message.contains("authorized_user") == true)
        let ec = attempt(["type": "service_account", "client_email": "a@b", "private_key": keys.ecPEM])
        let encrypted = attempt(["type": "service_account", "client_email": "a@b", "private_key": keys.encryptedPEM])
        for error in [ec, encrypted] {
            #expect(error?.kind == .credentials)
            #expect(error?.message.contains("not an unencrypted RSA private key") == true)
            #expect(error?.message.contains("BEGIN") == false)
        }
        let key = try ServiceAccountKey(json: keys.serviceAccountJSON(tokenURI: "https://oauth2.googleapis.com/token"), origin: "k")
        for text in ["\(key)", String(reflecting: key), "\(ServiceAccountTokenSource(key: key))"] {
            #expect(!text.contains("PRIVATE KEY"))
        }
        let token = AccessToken(value: "ya29.secret-value", expiresAt: Date())
        #expect(!"\(token)".contains("secret"))
        #expect(!String(reflecting: token).contains("secret"))
    }

    @Test func aServiceAccountKeyGetsATokenThatIsCachedAndRefreshed() async throws {
        let keys = try TestKeys.shared.get()
        // The test's clock runs an hour ahead of the fake's: it allows for that in iat.
        let fake = try FakeAuth(keys: keys, lifetime: 3600, maxSkew: 4000)
        let path = try keyFile(keys, tokenURI: fake.tokenURI)
        let clock = TestClock()
        let provider = AccessTokenProvider(source: try GoogleCredentials.tokenSource(environment: ["GOOGLE_APPLICATION_CREDENTIALS": path]),
                                           retry: Self.fastRetry, now: { clock.now })
        let first = try provider.blockingToken()
        #expect(first.value == "fake-sa-token-1")
        #expect(first.authorization == "Bearer fake-sa-token-1")
        #expect(try provider.blockingToken() == first)
        #expect(try await provider.token() == first)
        #expect(try fake.stats().issued == 1)
        // Five minutes before it expires, the next call fetches another.
        clock.advance(3600 - 301)
        #expect(try provider.blockingToken() == first)
        clock.advance(2)
        let second = try await provider.token()
        #expect(second.value == "fake-sa-token-2")
        let stats = try fake.stats()
        #expect(stats.issued == 2)
        #expect(stats.refused.isEmpty)
        #expect(stats.scopes == ["https://www.googleapis.com/auth/cloud-platform", "https://www.googleapis.com/auth/cloud-platform"])
        // After a 401 elsewhere, invalidate() forgets the token.
        provider.invalidate()
        #expect(try provider.blockingToken().value == "fake-sa-token-3")
    }

    @Test func aShortLivedTokenIsRefreshedAtHalfItsLife() throws {
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys, lifetime: 120)
        let clock = TestClock()
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry, now: { clock.now })
        #expect(try provider.blockingToken().value == "fake-sa-token-1")
        clock.advance(59)
        #expect(try provider.blockingToken().value == "fake-sa-token-1")
        clock.advance(2)
        #expect(try provider.blockingToken().value == "fake-sa-token-2")
    }

    @Test func theTokenEndpointRefusesAnotherKeysSignature() throws {
        let keys = try TestKeys.shared.get()
        // The endpoint knows another key: the assertion's signature cannot verify.
        let other = Repo.tempDirectory("snapthumb-other-key")
        defer { try? FileManager.default.removeItem(atPath: other) }
        #expect(try run("/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", other + "/key.pem"]).status == 0)
        #expect(try run("/usr/bin/openssl", ["pkey", "-in", other + "/key.pem", "-pubout", "-out", other + "/public.pem"]).status == 0)
        let fake = try FakeAuth(keys: keys, publicKeyPath: other + "/public.pem")
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry)
        let error = #expect(throws: GoogleError.self) { try provider.blockingToken() }
        #expect(error?.kind == .credentials)
        #expect(error?.status == 400)
        #expect(error?.message.contains("invalid_grant: Invalid JWT Signature.") == true)
        #expect(error?.message.contains("eyJ") == false)
        #expect(try fake.stats().refused == ["Invalid JWT Signature."])
    }

    @Test func aFailedRefreshKeepsTheCurrentTokenWhileItLasts() throws {
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys, lifetime: 3600, maxSkew: 4000)
        let clock = TestClock()
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry, now: { clock.now })
        let first = try provider.blockingToken()
        fake.helper.stop() // the token endpoint goes away
        clock.advance(3600 - 200) // inside the refresh window, 200 s left
        #expect(try provider.blockingToken() == first)
        clock.advance(150) // 50 s left: too close
        let error = #expect(throws: GoogleError.self) { try provider.blockingToken() }
        #expect(error?.message.contains("connection refused") == true)
    }

    @Test func pubSubCallsCarryTheTokenAndA401FetchesANewOne() async throws {
        let keys = try TestKeys.shared.get()
        // The fake's API refuses the first token (as if revoked) and takes the second.
        let fake = try FakeAuth(keys: keys, revokeFirst: true)
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry)
        let client = PubSubClient(endpoint: PubSubEndpoint(baseURL: URL(string: "http://\(fake.host)")!, authenticated: true), tokens: provider,
                                  retry: GoogleRetryPolicy(attempts: 2, base: 0.01, cap: 0.02))
        let subscription = try PubSubSubscription(project: "proj-test", id: "snapthumb")
        #expect(try await client.pull(subscription, wait: 0).isEmpty)
        var stats = try fake.stats()
        #expect(stats.issued == 2)
        #expect(stats.pulls_refused == 1)
        #expect(stats.pulls_ok == 1)
        // The next call uses the cached second token: no new token, no refusal.
        #expect(try await client.pull(subscription, wait: 0).isEmpty)
        stats = try fake.stats()
        #expect(stats.issued == 2)
        #expect(stats.pulls_ok == 2)

        // A token the API keeps refusing is an error after one refresh, and says nothing of the token.
        let stubborn = try FakeAuth(keys: keys, revokeFirst: true)
        let refusing = PubSubClient(endpoint: PubSubEndpoint(baseURL: URL(string: "http://\(stubborn.host)")!, authenticated: true),
                                    tokens: AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                                                retry: Self.fastRetry))
        let error = await #expect(throws: GoogleError.self) { try await refusing.pull(subscription, wait: 0) }
        #expect(error?.kind == .refused)
        #expect(error?.message.contains("UNAUTHENTICATED") == true)
        #expect(error?.message.contains("fake-sa-token") == false)
    }

    @Test func nothingSecretIsLoggedEvenAtTraceLevel() async throws {
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys, failFirst: 1, maxSkew: 4000)
        let log = CapturedLog()
        var logger = log.logger
        logger.logLevel = .trace
        let clock = TestClock()
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry, now: { clock.now }, logger: logger)
        let token = try provider.blockingToken()
        fake.helper.stop()
        clock.advance(3600 - 200)
        _ = try await provider.token() // the refresh fails: the fallback is logged
        let text = log.text
        #expect(text.contains("access token obtained"))
        #expect(text.contains("cannot refresh the access token"))
        #expect(!text.contains(token.value))
        #expect(!text.contains("PRIVATE KEY"))
        #expect(!text.contains("eyJ"))
    }

    @Test func unavailableAnswersAreRetried() throws {
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys, failFirst: 2)
        let provider = AccessTokenProvider(source: ServiceAccountTokenSource(key: try ServiceAccountKey(contentsOf: keyFile(keys, tokenURI: fake.tokenURI))),
                                           retry: Self.fastRetry)
        #expect(try provider.blockingToken().value == "fake-sa-token-1")
    }

    @Test func theMetadataServerGivesTokensOnlyToThoseWhoAskProperly() async throws {
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys, lifetime: 1800)
        let source = try GoogleCredentials.tokenSource(environment: ["GCE_METADATA_HOST": fake.host])
        let provider = AccessTokenProvider(source: source, retry: Self.fastRetry)
        let asked = Date()
        let token = try await provider.token()
        #expect(token.value == "fake-metadata-token-1")
        // expires_in counts from the answer, which came after `asked` (no wall-clock margin:
        // a loaded machine may take minutes between the two).
        #expect(token.expiresAt.timeIntervalSince(asked) >= 1800 - 1)
        #expect(token.expiresAt.timeIntervalSinceNow <= 1800)
        // The fake refuses a request without Metadata-Flavor: Google.
        let bare = try HTTPTransport().sendBlocking(HTTPRequest(method: "GET", url: URL(string: "http://\(fake.host)\(MetadataServerTokenSource.tokenPath)")!))
        #expect(bare.status == 403)

        let impostor = try FakeAuth(keys: keys, noFlavor: true)
        let fooled = AccessTokenProvider(source: MetadataServerTokenSource(host: impostor.host), retry: Self.fastRetry)
        let error = #expect(throws: GoogleError.self) { try fooled.blockingToken() }
        #expect(error?.message.contains("not from a metadata server") == true)
    }

    @Test func anUnreachableMetadataServerIsACredentialsError() throws {
        // A port nothing listens on (bound, then closed by the fake's exit).
        let keys = try TestKeys.shared.get()
        let fake = try FakeAuth(keys: keys)
        let host = fake.host
        fake.helper.stop()
        let provider = AccessTokenProvider(source: MetadataServerTokenSource(host: host), retry: Self.fastRetry)
        let error = #expect(throws: GoogleError.self) { try provider.blockingToken() }
        #expect(error?.kind == .credentials)
        #expect(error?.message.contains("connection refused") == true)
    }
}
