@testable import SystemKit
import Foundation
import Testing
import VipsKit

@Suite struct RS256Tests {
    @Test func signsLikeOpenSSLAndVerifiesWithThePublicHalf() throws {
        let keys = try TestKeys.shared.get()
        let message = Array("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0".utf8)
        let signature = try RS256.sign(message, privateKeyPEM: keys.privatePEM)
        #expect(signature.count == 256)
        // PKCS#1 v1.5 is deterministic: openssl's own signature is the same bytes.
        #expect(signature == (try keys.opensslSign(message)))
        #expect(try keys.opensslVerify(message, signature: signature))
        var tampered = message
        tampered[0] ^= 1
        #expect(try !keys.opensslVerify(tampered, signature: signature))
    }

    @Test func readsPKCS1KeysToo() throws {
        let keys = try TestKeys.shared.get()
        let message = Array("hello".utf8)
        #expect(try RS256.sign(message, privateKeyPEM: keys.pkcs1PEM) == RS256.sign(message, privateKeyPEM: keys.privatePEM))
    }

    @Test func refusesWhatIsNotAnRSAPrivateKey() throws {
        let keys = try TestKeys.shared.get()
        for pem in ["", "not a key", keys.publicPEM, keys.ecPEM, keys.encryptedPEM] {
            #expect(throws: RS256.Failure.notAnRSAPrivateKey) { try RS256.sign(Array("x".utf8), privateKeyPEM: pem) }
        }
        // The failure says nothing of the key.
        #expect(!"\(RS256.Failure.notAnRSAPrivateKey)".contains("BEGIN"))
    }
}
