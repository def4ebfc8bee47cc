import Foundation

/// Where a daemon serves its HTTP endpoints (`--listen HOST:PORT`): an IPv4 address, an IPv6
/// address in brackets, or `localhost` (127.0.0.1); port 0 takes any free port (the log says which).
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public enum Host: Sendable, Equatable { case ipv4(String), ipv6(String) }
    public let host: Host
    public let port: UInt16

    public init(host: Host, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `127.0.0.1:9090`, `0.0.0.0:9090`, `[::1]:9090`, `localhost:9090`; nil with a reason otherwise.
    public static func parse(_ text: String) -> Result<ListenAddress, ListenAddressError> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let colon = trimmed.lastIndex(of: ":") else {
            return .failure(ListenAddressError("must be HOST:PORT, such as 127.0.0.1:9090 or 0.0.0.0:9090 (got '\(text)')"))
        }
        var hostText = String(trimmed[..<colon])
        let portText = trimmed[trimmed.index(after: colon)...]
        guard let port = UInt16(portText) else {
            return .failure(ListenAddressError("must end in a port from 0 to 65535, as in 127.0.0.1:9090 (got '\(text)')"))
        }
        if hostText.hasPrefix("["), hostText.hasSuffix("]") {
            hostText = String(hostText.dropFirst().dropLast())
            guard isIPv6(hostText) else {
                return .failure(ListenAddressError("must name an IPv6 address in brackets, as in [::1]:9090 (got '\(text)')"))
            }
            return .success(ListenAddress(host: .ipv6(hostText), port: port))
        }
        if hostText.lowercased() == "localhost" { return .success(ListenAddress(host: .ipv4("127.0.0.1"), port: port)) }
        guard isIPv4(hostText) else {
            return .failure(ListenAddressError("must name an IP address (127.0.0.1 for this host only, 0.0.0.0 for every interface, [::1]) or localhost, then a port (got '\(text)')"))
        }
        return .success(ListenAddress(host: .ipv4(hostText), port: port))
    }

    public var description: String {
        switch host {
        case .ipv4(let address): return "\(address):\(port)"
        case .ipv6(let address): return "[\(address)]:\(port)"
        }
    }

    static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber) && Int(part)! <= 255
        }
    }

    static func isIPv6(_ text: String) -> Bool {
        !text.isEmpty && text.contains(":") && text.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }
}

/// Why a `--listen` value was refused (the caller names the flag or variable in front).
public struct ListenAddressError: Error, Sendable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
