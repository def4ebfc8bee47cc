/// The colour box of the modern square. libvips 8.14's heifsave lets libheif write its default
/// `nclx` box: matrix 6 (BT.601) and full range, which is how libheif converted the RGB, but
/// primaries 2 and transfer 2, "unspecified", so a viewer may guess a colour space. The pixels
/// are sRGB: this sets primaries 1 (BT.709) and transfer 13 (sRGB) in place, keeping the
/// matrix and range libheif wrote and used. The box has a fixed size, so only four bytes change
/// and nothing else in the file moves.
public enum HEIFColourBox {
    /// The file has no `nclx` box to rewrite.
    public struct NoColourBox: Error, CustomStringConvertible {
        public var description: String { "the HEIF encoder wrote no nclx colour box to declare sRGB in" }
    }

    /// sRGB's code points (ITU-T H.273).
    public static let primaries: UInt16 = 1, transfer: UInt16 = 13

    public struct NCLX: Equatable {
        public var primaries: UInt16, transfer: UInt16, matrix: UInt16, fullRange: Bool

        public init(primaries: UInt16, transfer: UInt16, matrix: UInt16, fullRange: Bool) {
            self.primaries = primaries; self.transfer = transfer; self.matrix = matrix; self.fullRange = fullRange
        }
    }

    /// `heif` with its `nclx` colour box declaring sRGB; an internal error when there is none
    /// (a libheif that writes none must not publish an undeclared image silently).
    public static func declaringSRGB(_ heif: [UInt8]) throws -> [UInt8] {
        guard let offset = nclxOffset(heif) else {
            throw NoColourBox()
        }
        var out = heif
        out[offset] = UInt8(primaries >> 8); out[offset + 1] = UInt8(primaries & 0xFF)
        out[offset + 2] = UInt8(transfer >> 8); out[offset + 3] = UInt8(transfer & 0xFF)
        return out
    }

    /// What the `nclx` box says, or nil.
    public static func nclx(_ heif: [UInt8]) -> NCLX? {
        guard let o = nclxOffset(heif), o + 7 <= heif.count else { return nil }
        func u16(_ i: Int) -> UInt16 { UInt16(heif[i]) << 8 | UInt16(heif[i + 1]) }
        return NCLX(primaries: u16(o), transfer: u16(o + 2), matrix: u16(o + 4), fullRange: heif[o + 6] & 0x80 != 0)
    }

    /// Where the `nclx` payload (colour primaries first) starts: meta → iprp → ipco → colr.
    public static func nclxOffset(_ bytes: [UInt8]) -> Int? {
        guard let meta = child(bytes, "meta", in: 0..<bytes.count),
              let iprp = child(bytes, "iprp", in: (meta.lowerBound + 4)..<meta.upperBound),  // meta is a full box
              let ipco = child(bytes, "ipco", in: iprp),
              let colr = child(bytes, "colr", in: ipco, where: { bytes[$0.lowerBound..<min($0.upperBound, $0.lowerBound + 4)].elementsEqual("nclx".utf8) }),
              colr.count >= 11
        else { return nil }
        return colr.lowerBound + 4
    }

    /// The payload range of the first box of `type` within `range` (optionally matching `test`).
    public static func child(_ bytes: [UInt8], _ type: String, in range: Range<Int>, where test: (Range<Int>) -> Bool = { _ in true }) -> Range<Int>? {
        var offset = range.lowerBound
        while offset + 8 <= range.upperBound {
            var size = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            var header = 8
            if size == 1, offset + 16 <= range.upperBound {
                size = bytes[(offset + 8)..<(offset + 16)].reduce(0) { $0 << 8 | Int($1) }
                header = 16
            } else if size == 0 {
                size = range.upperBound - offset
            }
            guard size >= header, offset + size <= range.upperBound else { return nil }
            let payload = (offset + header)..<(offset + size)
            if bytes[(offset + 4)..<(offset + 8)].elementsEqual(type.utf8), test(payload) { return payload }
            offset += size
        }
        return nil
    }
}
