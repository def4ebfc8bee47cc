@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import SnapThumbVerify
import VipsKit

/// Facts read from a HEIF file's boxes (a flat scan: the files are a few KB and the four-letter
/// box types below appear nowhere else in them).
struct HEIFBoxes {
    let bytes: [UInt8]

    /// The payload after the first box of this type, or nil.
    func payload(_ type: String) -> ArraySlice<UInt8>? {
        let tag = Array(type.utf8)
        guard bytes.count > 8 else { return nil }
        for i in 4..<(bytes.count - 4) where Array(bytes[i..<(i + 4)]) == tag {
            let size = Int(bytes[i - 4]) << 24 | Int(bytes[i - 3]) << 16 | Int(bytes[i - 2]) << 8 | Int(bytes[i - 1])
            guard size >= 8, i - 4 + size <= bytes.count else { continue }
            return bytes[(i + 4)..<(i - 4 + size)]
        }
        return nil
    }

    /// `ftyp`'s major brand.
    var brand: String { payload("ftyp").map { String(decoding: $0.prefix(4), as: UTF8.self) } ?? "" }

    /// AV1: (4:4:4, bit depth) from `av1C`; HEVC: from `hvcC`.
    var chroma: (full: Bool, bits: Int)? {
        if let av1C = payload("av1C").map(Array.init), av1C.count >= 3 {
            let flags = av1C[2]
            let high = flags & 0x40 != 0, twelve = flags & 0x20 != 0
            return (flags & 0x0C == 0, high ? (twelve ? 12 : 10) : 8)
        }
        if let hvcC = payload("hvcC").map(Array.init), hvcC.count >= 19 {
            return (hvcC[16] & 0x03 == 3, Int(hvcC[17] & 0x07) + 8)
        }
        return nil
    }
}

@Suite("Modern square (AVIF/HEIC)", .serialized)
struct ModernSquareTests {
    static let photo = Fixtures.sample("snaps/phone-portrait.jpg")

    static func upload(_ path: String = photo, _ edit: (inout Settings) -> Void) throws -> ProcessedUpload {
        try Fixtures.process(try Fixtures.bytes(path), key: (path as NSString).lastPathComponent, edit)
    }

    @Test("off by default: three variants, and the recipe says nothing of it (digest as before)")
    func offByDefault() throws {
        let upload = try Self.upload { _ in }
        #expect(upload.manifest.variants.keys.sorted() == ["pixel100", "pixel25", "square100"])
        #expect(upload.manifest.recipe.libheif == nil)
        let recipe = String(decoding: try JSONEncoder().encode(upload.manifest.recipe), as: UTF8.self)
        #expect(!recipe.contains("modern") && !recipe.contains("libheif"), "\(recipe)")
        // none is the default, spelled out or not.
        var none = Settings()
        none.square.modern = try Settings.SquareSettings.parseModern("none", source: "test")
        #expect(Recipe(settings: none).digest == Recipe(settings: Settings()).digest)
    }

    @Test("asked for, it is in the recipe: the digest changes, so stores re-derive", arguments: [HEIF.Codec.avif, .heic])
    func inTheRecipe(_ codec: HEIF.Codec) throws {
        var settings = Settings()
        settings.square.modern = codec
        let recipe = Recipe(settings: settings)
        #expect(recipe.digest != Recipe(settings: Settings()).digest)
        #expect(recipe.libheif?.isEmpty == false)
        // A one-CPU host would make other AVIF bytes: its recipe says so; this host has more.
        #expect(HEIF.aomThreads >= 1)
        #expect(recipe.aomThreads == (codec == .avif && HEIF.aomThreads == 1 ? 1 : nil))
        var otherEffort = settings
        otherEffort.square.modernEffort = settings.square.modernEffort == 0 ? 1 : 0
        if codec == .avif {
            #expect(Recipe(settings: otherEffort).digest != recipe.digest, "the effort changes AVIF's bytes, so it is in the recipe")
        } else {
            #expect(Recipe(settings: otherEffort).digest == recipe.digest, "x265 ignores the effort: HEIC's recipe does not name it")
        }
        let json = String(decoding: try JSONEncoder().encode(recipe.settings), as: UTF8.self)
        #expect(json.contains("\"modern\":\"\(codec.rawValue)\""))
    }

    @Test("square100-avif / -heic: its media type, 100×100, 8-bit 4:4:4, within the budget, quality and encodes recorded",
          arguments: [(HEIF.Codec.avif, 1500), (.avif, 2300), (.avif, 3072), (.avif, 4096), (.heic, 1500), (.heic, 4096)])
    func variant(_ codec: HEIF.Codec, _ budget: Int) throws {
        let upload = try Self.upload { $0.square.modern = codec; $0.square.budget = budget }
        let name = "square100-\(codec.rawValue)"
        let variant = try #require(upload.manifest.variants[name])
        #expect(upload.manifest.variants.count == 4)
        #expect(variant.mediaType == codec.mediaType)
        #expect(variant.width == 100 && variant.height == 100)
        #expect(variant.bytes <= budget && variant.budget == budget)
        #expect(variant.bytes >= budget / 2, "the search fills the budget (\(variant.bytes) of \(budget))")
        #expect((1...100).contains(variant.quality ?? 0) && variant.encodes >= 1)
        #expect(variant.colours == nil && variant.palette == nil)

        let bytes = Fixtures.blob(upload, name)
        let boxes = HEIFBoxes(bytes: bytes)
        #expect(boxes.brand == (codec == .avif ? "avif" : "heic"))
        let chroma = try #require(boxes.chroma)
        #expect(chroma.full && chroma.bits == 8, "4:4:4, 8 bits")
        let decoded = try Pixels(encoded: bytes)
        #expect(decoded.width == 100 && decoded.height == 100 && decoded.bands == 3)
    }

    @Test("it encodes square100's pixels: decoded, it is close to them, not to another crop")
    func samePixels() throws {
        let bytes = try Fixtures.bytes(Self.photo)
        var settings = Settings()
        settings.square.modern = .avif
        settings.square.budget = nil
        var snap = Snap(source: SourceBuffer(bytes), settings: settings)
        try Pipeline.run([.decode, .colour, .orient, .square], on: &snap)
        let square = snap.square

        let upload = try Pipeline(settings: settings).process(SourceBuffer(bytes), key: "p.jpg")
        let decoded = try Pixels(encoded: Fixtures.blob(upload, "square100-avif"))
        func meanError(_ a: [UInt8], _ b: [UInt8]) -> Double {
            Double(zip(a, b).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }) / Double(a.count)
        }
        let error = meanError(decoded.data, square)
        #expect(error < 3, "mean absolute error \(error) against square100's pixels")
        // A square shifted by 10 px is much further off: the comparison can tell.
        var shifted = [UInt8](repeating: 0, count: square.count)
        for y in 0..<100 { for x in 0..<100 { for c in 0..<3 { shifted[(y * 100 + x) * 3 + c] = square[(y * 100 + min(99, x + 10)) * 3 + c] } } }
        #expect(meanError(decoded.data, shifted) > 2 * error + 3)
    }

    @Test("no metadata: EXIF, XMP and GPS of the input are not in the AVIF, nor an ICC profile; colour is nclx")
    func stripped() throws {
        let upload = try Self.upload(Fixtures.sample("snaps/gps-tagged.jpg")) { $0.square.modern = .avif }
        let bytes = Fixtures.blob(upload, "square100-avif")
        let boxes = HEIFBoxes(bytes: bytes)
        for marker in ["Exif", "mime", "xmp", "GPS", "prof", "rICC"] {
            #expect(!String(decoding: bytes, as: UTF8.self).contains(marker), "\(marker) in the AVIF")
        }
        let colr = try #require(boxes.payload("colr"))
        #expect(String(decoding: colr.prefix(4), as: UTF8.self) == "nclx")
        #expect(colr.count == 11 && colr.last! & 0x80 != 0, "full range")
    }

    @Test("deterministic: the same bytes twice in one process and in two processes", arguments: [HEIF.Codec.avif, .heic])
    func deterministic(_ codec: HEIF.Codec) throws {
        let a = try Self.upload { $0.square.modern = codec }
        let b = try Self.upload { $0.square.modern = codec }
        #expect(a.manifest == b.manifest)
        #expect(Fixtures.blob(a, "square100-\(codec.rawValue)") == Fixtures.blob(b, "square100-\(codec.rawValue)"))

        var lines: [String] = []
        for _ in 0..<2 {
            let store = Fixtures.tempDirectory()
            defer { Fixtures.remove(store) }
            let result = try CLI.run(["process", Self.photo, "--store", store, "--modern", codec.rawValue, "--budget", "2300"])
            #expect(result.status == 0, "\(result.stderr)")
            lines.append(result.stdout)
        }
        #expect(lines[0] == lines[1], "two processes, one manifest (digests included)")
        #expect(lines[0].contains("\"square100-\(codec.rawValue)\""))
    }

    @Test("inline mode: the modern square's base64 fits the payload's room, like square100's")
    func inline() throws {
        let upload = try Self.upload { $0.square.modern = .avif; $0.budgetMode = .inline }
        let variant = try #require(upload.manifest.variants["square100-avif"])
        #expect(variant.budget == 4096 - Settings.defaultPayloadReserve)
        #expect(Budget.base64Length(variant.bytes) <= variant.budget!)
        #expect(variant.base64Length == Budget.base64Length(variant.bytes))
    }

    @Test("the search: never over budget, few encodes, degraded below its floor, budget when quality 1 does not fit")
    func search() throws {
        // Sizes like a HEIF's: the model's curve, steeper or flatter per image, with a wiggle
        // (neighbouring qualities share a quantiser); and a plain exponential the model does not know.
        let model = ModernBudgetSearch.Model.avif
        func curve(_ q: Int, a: Double, b: Double) -> Int {
            Int(exp(a + b * model.shape(Double(q)))) + (q % 3) * 7
        }
        func plain(_ q: Int, a: Double, b: Double) -> Int { 280 + Int(exp(a - 1 + 0.04 * Double(q))) }
        for (name, size, limit) in [("model", curve, 3.0), ("exponential", plain, 4.0)] as [(String, (Int, Double, Double) -> Int, Double)] {
            var encodes: [Int] = []
            for a in stride(from: 6.6, through: 8.4, by: 0.2) {
                for b in [0.8, 1.0, 1.25] {
                    for budget in [1500, 2300, 3072, 4096] where size(1, a, b) <= budget {
                        var tried: [Int] = []
                        let fitted = try ModernBudgetSearch.fit(budget: Budget(limit: budget, mode: .bytes), codec: .avif, start: 50) { q in
                            tried.append(q)
                            return [UInt8](repeating: 0, count: size(q, a, b))
                        }
                        #expect(fitted.bytes.count <= budget)
                        #expect(fitted.encodes == tried.count)
                        // The answer is quality 100, or the next quality up does not fit, or it fills the budget.
                        let q = fitted.quality!
                        #expect(q == 100 || size(q + 1, a, b) > budget || Double(fitted.bytes.count) >= ModernBudgetSearch.fill * Double(budget),
                                "\(name) a=\(a) b=\(b) budget \(budget): q \(q), tried \(tried)")
                        #expect(fitted.degraded == (q < ModernBudgetSearch.floor))
                        encodes.append(fitted.encodes)
                    }
                }
            }
            let mean = Double(encodes.reduce(0, +)) / Double(encodes.count)
            #expect(encodes.count > 50 && mean <= limit, "\(name): mean encodes \(mean) over \(encodes.count) searches")
        }

        // A hard image: only low qualities fit, marked degraded.
        let low = try ModernBudgetSearch.fit(budget: Budget(limit: 1500, mode: .bytes), codec: .avif, start: 50) { q in
            [UInt8](repeating: 0, count: 1000 + 40 * q)
        }
        #expect(low.quality! < ModernBudgetSearch.floor && low.degraded)

        // Nothing fits: a clear budget failure, the same every time.
        for _ in 0..<2 {
            #expect {
                _ = try ModernBudgetSearch.fit(budget: Budget(limit: 300, mode: .bytes), codec: .avif, start: 50) { q in
                    [UInt8](repeating: 0, count: 400 + q)
                }
            } throws: { error in
                let error = error as? SnapError
                return error?.code == .budget && error?.message.contains("even at AVIF quality 1 square100-avif is 401 bytes, over its budget of 300") == true
            }
        }
    }

    @Test("a libvips that cannot encode HEIF is a configuration error at start, naming what is missing")
    func missingEncoder() throws {
        struct ClassNotFound: Error, CustomStringConvertible {
            var description: String { "heifsave: VipsOperation: class \"heifsave_buffer\" not found" }
        }
        #expect {
            try ModernEncoderCheck.require(.avif) { _ in throw ClassNotFound() }
        } throws: { error in
            let error = error as? SnapError
            return error?.code == .config && error?.message.contains("--modern avif needs libvips' heifsave") == true
                && error?.message.contains("heifsave_buffer\" not found") == true
        }
        // This machine's libvips has it: the real check passes, and a pipeline builds.
        try ModernEncoderCheck.require(.avif)
        try ModernEncoderCheck.require(.heic)
    }

    @Test("flag, environment and config file; a bad value is a usage error")
    func configuration() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let bad = try CLI.run(["process", Self.photo, "--store", store, "--modern", "webp"])
        #expect(bad.status == 2 && bad.stderr.contains("--modern must be avif, heic or none (got 'webp')"), "\(bad.stderr)")
        let effort = try CLI.run(["process", Self.photo, "--store", store, "--modern", "avif", "--modern-effort", "12"])
        #expect(effort.status == 2 && effort.stderr.contains("square.modernEffort must be 0–9 (got 12)"), "\(effort.stderr)")

        let env = try CLI.run(["config", "--json"], environment: ["SNAPTHUMB_MODERN": "heic"])
        #expect(env.status == 0 && env.stdout.contains("SNAPTHUMB_MODERN"), "\(env.stdout)")
        let config = "\(store)/cfg.json"
        try Data(#"{"pipeline": {"square": {"modern": "avif", "modernEffort": 3}}}"#.utf8).write(to: URL(fileURLWithPath: config))
        let fromFile = try CLI.run(["process", Self.photo, "--store", store, "--config", config])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let manifest = try Manifest.decode(Data(fromFile.stdout.utf8))
        #expect(manifest.variants["square100-avif"] != nil)
        #expect(manifest.recipe.settings.square.modernEffort == 3)
        #expect(try StoreVerifier.verify(root: store).isClean)
    }

    @Test("the schema takes the modern variant with its media type and quality, and nothing looser")
    func schema() throws {
        let upload = try Self.upload { $0.square.modern = .avif }
        let validator = try ManifestSchema.validator()
        let object = try #require(try JSONSerialization.jsonObject(with: upload.manifest.json()) as? [String: Any])
        #expect(validator.validate(object: object) == [])
        func with(_ edit: (inout [String: Any]) -> Void) -> [String] {
            var variants = object["variants"] as! [String: Any]
            var avif = variants["square100-avif"] as! [String: Any]
            edit(&avif)
            variants["square100-avif"] = avif
            var copy = object
            copy["variants"] = variants
            return validator.validate(object: copy)
        }
        #expect(!with { $0["mediaType"] = "image/jpeg" }.isEmpty, "square100-avif must be AVIF or HEIC")
        #expect(!with { $0["mediaType"] = "image/webp" }.isEmpty)
        #expect(!with { $0.removeValue(forKey: "quality") }.isEmpty)
        #expect(!with { $0["quality"] = 101 }.isEmpty)
        #expect(with { $0["mediaType"] = "image/heic" }.isEmpty)
    }

    @Test("backfill re-derives a store when the modern square is asked for; verify checks it like the others")
    func backfillAndVerify() throws {
        let root = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(root); Fixtures.remove(store) }
        try FileManager.default.copyItem(atPath: Self.photo, toPath: "\(root)/a.jpg")
        #expect(try CLI.run(["backfill", root, "--store", store]).status == 0)
        let first = try Manifest.decode(Data(contentsOf: URL(fileURLWithPath: "\(store)/manifests/a.jpg.json")))
        #expect(first.variants["square100-avif"] == nil)

        let again = try CLI.run(["backfill", root, "--store", store, "--modern", "avif"])
        #expect(again.status == 0, "\(again.stderr)")
        let second = try Manifest.decode(Data(contentsOf: URL(fileURLWithPath: "\(store)/manifests/a.jpg.json")))
        let avif = try #require(second.variants["square100-avif"])
        #expect(second.variants["square100"] == first.variants["square100"], "square100 is unchanged")
        #expect(try StoreVerifier.verify(root: store).isClean)

        // verify: a modern variant over its budget (or pointing at the wrong blob) is a problem.
        var tampered = second
        tampered.variants["square100-avif"]!.budget = avif.bytes - 1
        try tampered.json().write(to: URL(fileURLWithPath: "\(store)/manifests/a.jpg.json"))
        let report = try StoreVerifier.verify(root: store)
        #expect(report.problems.contains { $0.contains("variant square100-avif is \(avif.bytes) bytes, over its budget of \(avif.bytes - 1)") },
                "\(report.problems)")
    }
}

@Suite("Modern square colour box")
struct ModernColourBoxTests {
    @Test("the AVIF colour box declares sRGB: nclx primaries 1, transfer 13, BT.601 matrix, full range")
    func declaresSRGB() throws {
        let codec = HEIF.Codec.avif
        let bytes = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        for budget in [1500, 4096] {
            let upload = try Fixtures.process(bytes) { $0.square.modern = codec; $0.square.budget = budget }
            let heif = Fixtures.blob(upload, "square100-\(codec.rawValue)")
            let colr = try #require(HEIFBoxes(bytes: heif).payload("colr").map(Array.init))
            #expect(Array(colr.prefix(4)) == Array("nclx".utf8))
            #expect(Array(colr[4..<11]) == [0, 1, 0, 13, 0, 6, 0x80], "nclx \(colr[4..<11].map { $0 })")
            #expect(HEIFColourBox.nclx(heif) == .init(primaries: 1, transfer: 13, matrix: 6, fullRange: true))
            // The matrix and range are the ones the pixels were coded with: the decoded square
            // is square100's colours (libvips decodes with the box's matrix).
            let decoded = try Pixels(encoded: heif), jpeg = try Pixels(encoded: Fixtures.blob(upload, "square100"))
            #expect(decoded.blockDifference(jpeg) < 6, "\(decoded.blockDifference(jpeg))")
        }
    }

    @Test("a HEIF without an nclx box is refused, not published undeclared")
    func noBox() {
        #expect(throws: HEIFColourBox.NoColourBox.self) { try HEIFColourBox.declaringSRGB(Array("not a heif file at all".utf8)) }
    }
}
