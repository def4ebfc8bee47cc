@testable import SystemKit
import Foundation
import SnapThumbTesting
import Testing
@testable import SnapThumbGoogle

/// Paths of this checkout.
enum Repo {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    static func tempDirectory(_ name: String = "snapthumb-google-test") -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Runs a program to its end: exit status and standard output.
func run(_ program: String, _ arguments: [String], input: Data = Data()) throws -> (status: Int32, output: Data) {
    let process = try SpawnedProcess(program, arguments, stdin: .pipe, stdout: .pipe, stderr: .null)
    process.input!.write(input)
    try process.input!.close()
    let output = process.output!.readDataToEndOfFile()
    return (process.wait().code, output)
}

/// A throwaway RSA key made for this test process with `openssl genpkey`, its public
/// half, and a few PEM texts that are not RSA private keys.
struct TestKeys: Sendable {
    let directory: String
    let privatePEM: String
    let pkcs1PEM: String
    let publicPEM: String
    let ecPEM: String
    let encryptedPEM: String
    var privatePath: String { directory + "/key.pem" }
    var publicPath: String { directory + "/public.pem" }

    static let shared: Result<TestKeys, any Error> = Result { try TestKeys() }

    init() throws {
        let directory = Repo.tempDirectory("snapthumb-keys")
        self.directory = directory
        let openssl = "/usr/bin/openssl"
        func make(_ arguments: [String]) throws {
            let (status, _) = try run(openssl, arguments)
            guard status == 0 else { throw GoogleError(.invalid, "openssl \(arguments.joined(separator: " ")) failed") }
        }
        try make(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", directory + "/key.pem"])
        try make(["pkey", "-in", directory + "/key.pem", "-pubout", "-out", directory + "/public.pem"])
        try make(["rsa", "-in", directory + "/key.pem", "-traditional", "-out", directory + "/pkcs1.pem"])
        try make(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", directory + "/ec.pem"])
        try make(["pkey", "-in", directory + "/key.pem", "-aes256", "-passout", "pass:secret", "-out", directory + "/encrypted.pem"])
        func read(_ name: String) throws -> String { try String(contentsOfFile: directory + "/" + name, encoding: .utf8) }
        privatePEM = try read("key.pem")
        pkcs1PEM = try read("pkcs1.pem")
        publicPEM = try read("public.pem")
        ecPEM = try read("ec.pem")
        encryptedPEM = try read("encrypted.pem")
        guard privatePEM.contains("BEGIN PRIVATE KEY"), pkcs1PEM.contains("BEGIN RSA PRIVATE KEY") else {
            throw GoogleError(.invalid, "openssl wrote keys in an unexpected form")
        }
    }

    func opensslSign(_ message: [UInt8]) throws -> [UInt8] {
        let (status, output) = try run("/usr/bin/openssl", ["dgst", "-sha256", "-sign", privatePath], input: Data(message))
        guard status == 0 else { throw GoogleError(.invalid, "openssl dgst -sign failed") }
        return Array(output)
    }

    func opensslVerify(_ message: [UInt8], signature: [UInt8]) throws -> Bool {
        let signaturePath = directory + "/signature-\(UUID().uuidString)"
        try Data(signature).write(to: URL(fileURLWithPath: signaturePath))
        defer { try? FileManager.default.removeItem(atPath: signaturePath) }
        return try run("/usr/bin/openssl", ["dgst", "-sha256", "-verify", publicPath, "-signature", signaturePath], input: Data(message)).status == 0
    }

    /// A service-account key file for this key, its token_uri at `tokenURI`.
    func serviceAccountJSON(email: String = "snapthumb@proj-test.iam.gserviceaccount.com", tokenURI: String, keyID: String = "kid-1") throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "type": "service_account", "project_id": "proj-test", "private_key_id": keyID, "private_key": privatePEM,
            "client_email": email, "client_id": "1234567890", "token_uri": tokenURI,
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        ])
    }
}

