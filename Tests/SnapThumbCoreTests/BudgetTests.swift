import Foundation
import Testing
@_spi(Benchmarks) @testable import SnapThumbCore
@testable import SnapThumbRunner
import VipsKit

@Suite("Byte budgets")
struct BudgetTests {
    static let photos = ["snaps/phone-portrait.jpg", "snaps/phone-rotated.jpg", "snaps/display-p3.jpg", "snaps/landscape.webp",
                         "snaps/iphone.heic", "snaps/cmyk-profile.jpg", "snaps/alpha.png", "orientation/upright.png"]

    @Test("no variant is ever written over its budget", arguments: [(4096, Settings.BudgetMode.bytes), (2048, .bytes), (1200, .bytes), (4096, .inline)])
    func neverOver(limit: Int, mode: Settings.BudgetMode) throws {
        let pipeline = try Fixtures.pipeline {
            $0.square.budget = limit; $0.pixel.budget = limit; $0.pixel.gridBudget = limit; $0.budgetMode = mode
        }
        let budget = Budget(limit: limit, mode: mode)
        for file in Self.photos {
            let upload = try pipeline.process(SourceBuffer(Fixtures.bytes(Fixtures.sample(file))), key: "b.jpg")
            for (name, variant) in upload.manifest.variants {
                let bytes = Fixtures.blob(upload, name)
                #expect(bytes.count == variant.bytes)
                #expect(budget.fits(bytes.count), "\(file) \(name): \(bytes.count) bytes over \(limit) (\(mode))")
                #expect(variant.encodes >= 1)
                // Inline, the square shares the push payload: its budget is the payload's room (issue 13).
                let expected = name == "square100" && mode == .inline ? 4096 - Settings.defaultPayloadReserve : limit
                #expect(variant.budget == expected && variant.budgetMode == mode)
                #expect(Budget(limit: expected, mode: mode).fits(bytes.count))
            }
        }
    }

    @Test("inline mode counts base64 characters")
    func base64() {
        #expect(Budget.base64Length(0) == 0)
        #expect(Budget.base64Length(1) == 4)
        #expect(Budget.base64Length(3) == 4)
        #expect(Budget.base64Length(3072) == 4096)
        #expect(Budget(limit: 4096, mode: .inline).fits(3072))
        #expect(!Budget(limit: 4096, mode: .inline).fits(3073))
        #expect(Budget(limit: 4096, mode: .bytes).fits(4096))
    }

    /// Runs the search over a size function and checks it finds the true answer.
    static func search(_ size: (Int) -> Int, limit: Int) throws -> (fitted: Fitted, expected: Int?, calls: [Int]) {
        var calls: [Int] = []
        let fitted = try JPEGBudgetSearch.fit(range: 40...90, budget: Budget(limit: limit, mode: .bytes)) { q in
            calls.append(q)
            return [UInt8](repeating: 0, count: size(q))
        }
        return (fitted, (40...90).last { size($0) <= limit }, calls)
    }

    @Test("the search finds the highest fitting quality in few encodes on JPEG-shaped sizes")
    func searchTypical() throws {
        // Images of different complexity: the typical curve scaled, slightly tilted.
        for scale in [2500.0, 4000, 6000, 8000] {
            for tilt in [0.85, 1.0, 1.2] {
                let size = { (q: Int) in Int(scale * exp(tilt * JPEGBudgetSearch.shape(Double(q)))) }
                let (fitted, expected, calls) = try Self.search(size, limit: 4096)
                #expect(fitted.quality == expected, "scale \(scale) tilt \(tilt): calls \(calls)")
                #expect(fitted.encodes == calls.count)
                #expect(fitted.encodes <= 4, "scale \(scale) tilt \(tilt): \(calls)")
            }
        }
    }

    @Test("on an unusual size curve the search is still exact and bounded")
    func searchUnusual() throws {
        for limit in [900, 1500, 2600, 4096, 5000] {
            let size = { (q: Int) in Int(700 * exp(0.035 * Double(q - 40))) }
            let (fitted, expected, calls) = try Self.search(size, limit: limit)
            #expect(fitted.quality == expected, "limit \(limit): \(calls)")
            #expect(fitted.encodes <= 8, "limit \(limit): \(calls)")
            #expect(!fitted.degraded)
        }
    }

    @Test("below the range floor the variant is degraded, and nothing fitting fails with budget")
    func degradedAndFailure() throws {
        let photo = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let degraded = try Fixtures.process(photo) { $0.square.budget = 700; $0.square.qualityMin = 85 }
        let square = degraded.manifest.variants["square100"]!
        #expect(square.degraded)
        #expect(square.quality! < 85)
        #expect(square.bytes <= 700)

        #expect(throws: SnapError.self) { try Fixtures.process(photo) { $0.square.budget = 64 } }
        do { _ = try Fixtures.process(photo) { $0.square.budget = 64 } } catch let error as SnapError {
            #expect(error.code == .budget)
            #expect(error.message.contains("64"))
        }
    }

    @Test("a tight pixel-art budget drops colours first, keeping both PNGs on one palette")
    func fewerColours() throws {
        let photo = try Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))
        let normal = try Fixtures.process(photo)
        let normalBytes = normal.manifest.variants["pixel100"]!.bytes
        let tight = try Fixtures.process(photo) { $0.pixel.budget = normalBytes - 100 }
        let variant = tight.manifest.variants["pixel100"]!
        #expect(variant.bytes <= normalBytes - 100)
        #expect(variant.degraded)
        #expect(variant.colours! < 16)
        #expect(tight.manifest.variants["pixel25"]!.colours == variant.colours)
        #expect(variant.encodes > 1)
    }
}

@Suite("Budget search on real photos")
struct BudgetSearchPhotoTests {
    @Test("finds the highest fitting quality (as trying every quality does) in at most 3 encodes on average")
    func realPhotos() throws {
        let settings = Settings()
        _ = try Pipeline(settings: settings)
        var encodes: [Int] = []
        for entry in try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files {
            let source = try InputFile.read(entry.path, limit: settings.limits.maxInputBytes)
            var snap = Snap(source: source, settings: settings)
            try Pipeline.run(BenchmarkSupport.stage(through: "orient"), on: &snap)
            let rgb = try snap.required(snap.image, "image").vipsImage().thumbnail(width: 100, height: 100, crop: .centre).pixels()
            let encode = { (q: Int) in try JPEG.encode(rgb: rgb, width: 100, height: 100, quality: q) }
            for limit in [4096, 3072, 2048] {
                let fitted = try JPEGBudgetSearch.fit(range: 40...90, budget: Budget(limit: limit, mode: .bytes), encode: encode)
                let best = try (40...90).last { try encode($0).count <= limit }
                #expect(fitted.quality == best, "\(entry.relativePath) at \(limit)")
                if limit == 4096 { encodes.append(fitted.encodes) }
            }
        }
        let mean = Double(encodes.reduce(0, +)) / Double(encodes.count)
        #expect(mean <= 3, "mean encodes \(mean): \(encodes)")
    }
}
