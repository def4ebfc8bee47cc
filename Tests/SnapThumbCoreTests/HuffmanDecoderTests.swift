@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
import VipsKit

/// SnapThumb's Huffman decoder stands in for libjpeg's in baseline scans
/// (jpeg_entropy.c). Its coefficients must be libjpeg's, and every file it does not
/// decode cleanly to the end must get libjpeg's own answer: these tests hold the
/// decoder to libjpeg's (`ownHuffmanDecoder: false`) on the same bytes.
@Suite struct HuffmanDecoderTests {
    /// The pixels as a digest, so that a failure prints a line, not an image.
    enum Outcome: Equatable {
        case pixels(sha256: String, width: Int, height: Int, PixelRegion)
        case failed(String)
    }

    static func decode(_ bytes: [UInt8], failOn: Int, own: Bool, shrink: Int, region: PixelRegion? = nil) -> (Outcome, Bool) {
        do {
            let decoder = try JPEGDecoder(SourceBuffer(bytes), failOn: failOn, ownHuffmanDecoder: own)
            do {
                let out = try decoder.decodePixels(shrink: shrink, region: region)
                return (.pixels(sha256: SHA256.hex(out.pixels), width: out.width, height: out.height, out.region),
                        decoder.usedOwnHuffmanDecoder)
            } catch let error as VipsError {
                return (.failed(error.message), decoder.usedOwnHuffmanDecoder)
            }
        } catch {
            return (.failed("header: \(error)"), false)
        }
    }

    /// Real photographs re-encoded every way the decoder meets them: 4:2:0 and
    /// 4:4:4, with and without restart markers, and the samples as they are.
    static func variants() throws -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        for name in ["snaps/phone-portrait.jpg", "snaps/grey.jpg", "snaps/cmyk-profile.jpg", "snaps/adobe-rgb.jpg"] {
            out.append((name, try Fixtures.bytes(Fixtures.sample(name))))
        }
        let photo = try VImage.load(SourceBuffer(try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))), options: "shrink=2")
        for (subsample, label) in [(Subsample.on, "4:2:0"), (.off, "4:4:4")] {
            for restart in [0, 1, 5] {
                for quality in [60, 95] {
                    out.append(("\(label) restart \(restart) Q\(quality)",
                                try photo.jpeg(quality: quality, subsample: subsample, restartInterval: restart)))
                }
            }
        }
        // Noise at Q100 with optimised tables: large AC values are common, so their
        // symbols get short codes, and look-up entries meet magnitudes past ±127.
        var random = OKLabKernelTests.Random(state: 100)
        let noise = (0..<(96 * 64 * 3)).map { _ in random.byte() }
        out.append(("noise Q100", try VImage.fromRGB(noise, width: 96, height: 64).jpeg(quality: 100, subsample: .off)))
        // A ramp across every 8 pixels at Q100: most blocks' first AC coefficient is
        // about -180, size 8, so the most common symbol gets a short code and its
        // magnitude fits a look-up entry but not the entry's 8-bit value.
        let ramp = (0..<(96 * 64)).flatMap { i -> [UInt8] in
            let v = UInt8(90 + 70 * (i % 96 % 8) / 7)
            return [v, v, v]
        }
        out.append(("ramp Q100", try VImage.fromRGB(ramp, width: 96, height: 64).jpeg(quality: 100, subsample: .off)))
        return out
    }

    @Test("baseline files: ours decodes them to libjpeg's pixels at every shrink, whole or a region")
    func sameAsLibjpeg() throws {
        for (name, bytes) in try Self.variants() {
            for shrink in [1, 2, 4, 8] {
                let header = try JPEGDecoder(SourceBuffer(bytes), failOn: 3)
                let (w, h) = (header.width / shrink, header.height / shrink)
                let side = min(w, h)
                for region in [nil, PixelRegion(left: (w - side) / 2, top: (h - side) / 2, width: side, height: side)] {
                    let (own, used) = Self.decode(bytes, failOn: 3, own: true, shrink: shrink, region: region)
                    let (reference, referenceUsed) = Self.decode(bytes, failOn: 3, own: false, shrink: shrink, region: region)
                    #expect(used, "\(name) at 1/\(shrink): not decoded by ours")
                    #expect(!referenceUsed)
                    if case .failed(let message) = reference { Issue.record("\(name): \(message)") }
                    #expect(own == reference, "\(name) at 1/\(shrink), region \(String(describing: region))")
                }
            }
        }
    }

    /// With our decoder come libjpeg's 2×2 and 4×4 IDCTs done two blocks at a time
    /// (jpeg_idct.c). These files hold extreme coefficients under random quantisation
    /// tables (Tests/Fixtures/jpeg-coefficients/make.c): dequantised values wrap
    /// around 16 bits, sums saturate, and the 4×4's shortcut for blocks with only
    /// row 0 rounds differently from its full path. The pixels must still be libjpeg's.
    @Test("extreme coefficients: the same pixels as libjpeg's at every shrink")
    func extremeCoefficients() throws {
        let directory = "\(Fixtures.root)/Tests/Fixtures/jpeg-coefficients"
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".jpg") }.sorted()
        #expect(names.count == 8)
        for name in names {
            let bytes = try Fixtures.bytes("\(directory)/\(name)")
            for shrink in [1, 2, 4, 8] {
                let (own, used) = Self.decode(bytes, failOn: 3, own: true, shrink: shrink)
                let (reference, _) = Self.decode(bytes, failOn: 3, own: false, shrink: shrink)
                #expect(used, "\(name) at 1/\(shrink): not decoded by ours")
                if case .failed(let message) = reference { Issue.record("\(name): \(message)") }
                #expect(own == reference, "\(name) at 1/\(shrink)")
            }
        }
    }

    @Test("a progressive file is left to libjpeg")
    func progressiveIsLibjpegs() throws {
        let photo = try VImage.load(SourceBuffer(try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))), options: "shrink=4")
        let bytes = try photo.jpeg(quality: 80, progressive: true)
        let (own, used) = Self.decode(bytes, failOn: 3, own: true, shrink: 4)
        #expect(!used)
        #expect(own == Self.decode(bytes, failOn: 3, own: false, shrink: 4).0)
    }

    /// Where the entropy-coded data starts and ends (after SOS's header, before EOI).
    static func scan(_ bytes: [UInt8]) throws -> Range<Int> {
        let sos = try #require((0..<bytes.count - 1).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
        let start = sos + 2 + Int(bytes[sos + 2]) << 8 + Int(bytes[sos + 3])
        let end = try #require((start..<bytes.count - 1).last { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xD9 })
        return start..<end
    }

    @Test("damaged data: the same pixels or the same error as libjpeg's, at fail_on none and warning")
    func damageGetsLibjpegsAnswer() throws {
        let photo = try VImage.load(SourceBuffer(try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))), options: "shrink=4")
        var random = OKLabKernelTests.Random(state: 27)
        var ownDecoded = 0, deferred = 0, failed = 0
        for restart in [0, 2] {
            let clean = try photo.jpeg(quality: 85, restartInterval: restart)
            let data = try Self.scan(clean)
            for round in 0..<150 {
                var bytes = clean
                let at = data.lowerBound + Int(random.next() % UInt64(data.count))
                switch round % 10 {
                case 0: bytes[at] ^= UInt8(1 << (random.next() % 8))
                case 1: bytes[at] = 0xFF
                case 2: bytes.insert(contentsOf: [0xFF, 0xD0 + UInt8(random.next() % 8)], at: at)
                case 3: bytes.insert(contentsOf: [0xFF, 0xD9], at: at)
                case 4: bytes = Array(bytes.prefix(at))
                case 5: bytes.insert(contentsOf: [UInt8(random.next() % 256)], at: at)
                case 6: bytes.removeSubrange(at..<min(at + 3, data.upperBound))
                case 7:
                    // A restart marker removed, or fill bytes before one (allowed).
                    if let rst = (at..<data.upperBound - 1).first(where: { bytes[$0] == 0xFF && (0xD0...0xD7).contains(bytes[$0 + 1]) }) {
                        if random.next() % 2 == 0 { bytes.removeSubrange(rst..<rst + 2) } else { bytes.insert(contentsOf: [0xFF, 0xFF], at: rst) }
                    }
                case 8: bytes.replaceSubrange(data.upperBound..<data.upperBound + 2, with: [0x12, 0x34])
                default: bytes[at] = UInt8(random.next() % 256)
                }
                for failOn in [0, 3] {
                    let (own, used) = Self.decode(bytes, failOn: failOn, own: true, shrink: 4)
                    let (reference, _) = Self.decode(bytes, failOn: failOn, own: false, shrink: 4)
                    #expect(own == reference, "restart \(restart), round \(round), fail_on \(failOn)")
                    if used { ownDecoded += 1 } else { deferred += 1 }
                    if case .failed = reference { failed += 1 }
                }
            }
        }
        // Both ways were taken: files ours decoded, and files it left to libjpeg.
        #expect(ownDecoded > 50 && deferred > 50 && failed > 50, "\(ownDecoded) decoded by ours, \(deferred) by libjpeg, \(failed) failed")
    }
}
