import Foundation
internal import CSystemShim

/// RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 section 3.3) from OpenSSL: the
/// signature of the JWT that Google's OAuth endpoint exchanges for an access token.
public enum RS256 {
    /// Why a signature could not be made. Neither case carries anything of the key.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        /// The PEM text holds no unencrypted RSA private key (PKCS#8 or PKCS#1).
        case notAnRSAPrivateKey
        /// OpenSSL failed to sign (or the key is larger than 8192 bits).
        case signingFailed

        public var description: String {
            switch self {
            case .notAnRSAPrivateKey: "not an unencrypted RSA private key in PEM form"
            case .signingFailed: "RS256 signing failed"
            }
        }
    }

    /// The signature of `message` (as many bytes as the key's modulus). PKCS#1 v1.5
    /// is deterministic: the same key and message give the same bytes.
    public static func sign<Message: ContiguousBytes>(_ message: Message, privateKeyPEM: String) throws(Failure) -> [UInt8] {
        let pem = Array(privateKeyPEM.utf8)
        var signature = [UInt8](repeating: 0, count: 1024)
        var length = signature.count
        let status = pem.withUnsafeBytes { key in
            message.withUnsafeBytes { data in
                signature.withUnsafeMutableBytes { out in
                    snap_rs256_sign(key.baseAddress?.assumingMemoryBound(to: CChar.self), key.count, data.baseAddress, data.count,
                                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
                }
            }
        }
        switch status {
        case 0: return Array(signature.prefix(length))
        case -1: throw .notAnRSAPrivateKey
        default: throw .signingFailed
        }
    }
}
