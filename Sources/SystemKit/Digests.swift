import Foundation
internal import CSystemShim

/// HMAC-SHA256 (RFC 2104) from OpenSSL: the primitive of AWS Signature Version 4.
public enum HMACSHA256 {
    public static func authenticate<Key: ContiguousBytes, Message: ContiguousBytes>(_ message: Message, key: Key) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                out.withUnsafeMutableBytes {
                    snap_hmac_sha256(k.baseAddress, k.count, m.baseAddress, m.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return out
    }
}

/// MD5, for `Content-MD5` headers only (integrity of one request body, never an address).
public enum MD5 {
    public static func digest<Bytes: ContiguousBytes>(_ bytes: Bytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { snap_md5(input.baseAddress, input.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        return out
    }
}

/// SHA-256 (OpenSSL's libcrypto: it uses the CPU's SHA instructions, ten times GLib's speed).
public enum SHA256 {
    public static func digest<Bytes: ContiguousBytes>(_ bytes: Bytes) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { snap_sha256(input.baseAddress, input.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
        }
        return out
    }

    public static func hex<Bytes: ContiguousBytes>(_ bytes: Bytes) -> String {
        digest(bytes).map { byte in
            let s = String(byte, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined()
    }
}
