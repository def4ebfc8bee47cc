@testable import SystemKit
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
import SnapThumbStore
@_spi(Benchmarks) @testable import SnapThumbCore
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

    /// Runs the search over a size function; also returns the highest fitting quality.
    static func search(_ size: (Int) -> Int, limit: Int, start: Int? = nil) throws -> (fitted: Fitted, expected: Int?, calls: [Int]) {
        var calls: [Int] = []
        let fitted = try JPEGBudgetSearch.fit(range: 40...100, budget: Budget(limit: limit, mode: .bytes), start: start,
                                              size: { q in calls.append(q); return size(q) },
                                              write: { q in [UInt8](repeating: 0, count: size(q)) })
        return (fitted, (40...100).last { size($0) <= limit }, calls)
    }

    /// The search's promise: within budget, and either `fill` full (`laterFill` once
    /// the first encode missed), or the range's top, or one quality below a size
    /// that does not fit.
    static func checkFilled(_ fitted: Fitted, size: (Int) -> Int, limit: Int, _ note: String) {
        #expect(fitted.bytes.count <= limit, "\(note)")
        let q = fitted.quality!
        let fill = fitted.encodes == 1 ? JPEGBudgetSearch.fill : JPEGBudgetSearch.laterFill
        #expect(Double(fitted.bytes.count) >= fill * Double(limit) || q == 100 || size(q + 1) > limit,
                "\(note): q \(q), \(fitted.bytes.count) bytes")
    }

    @Test("the search fills the budget in few encodes on JPEG-shaped sizes, beyond quality 90 as well")
    func searchTypical() throws {
        // Images of different complexity: the typical curve scaled, slightly tilted.
        for scale in [900.0, 1500, 2500, 4000, 6000, 8000] {
            for tilt in [0.85, 1.0, 1.2] {
                let size = { (q: Int) in Int(scale * exp(tilt * JPEGBudgetSearch.shape(Double(q)))) }
                let (fitted, expected, calls) = try Self.search(size, limit: 4096)
                #expect(fitted.quality! <= expected!)
                Self.checkFilled(fitted, size: size, limit: 4096, "scale \(scale) tilt \(tilt): calls \(calls)")
                #expect(fitted.encodes == calls.count)
                #expect(fitted.encodes <= 4, "scale \(scale) tilt \(tilt): \(calls)")
            }
        }
    }

    @Test("on an unusual size curve the search still fills the budget, bounded")
    func searchUnusual() throws {
        for limit in [900, 1500, 2600, 4096, 5000] {
            for start in [nil, 40, 70, 95] as [Int?] {
                let size = { (q: Int) in Int(700 * exp(0.035 * Double(q - 40))) }
                let (fitted, _, calls) = try Self.search(size, limit: limit, start: start)
                Self.checkFilled(fitted, size: size, limit: limit, "limit \(limit): \(calls)")
                #expect(fitted.encodes <= 8, "limit \(limit): \(calls)")
                #expect(!fitted.degraded)
            }
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
    /// Every decodable sample photo's 100 px square, made as the pipeline makes it.
    static func squares() throws -> [(String, [UInt8])] {
        let settings = Settings()
        _ = try Pipeline(settings: settings)
        var squares: [(String, [UInt8])] = []
        for folder in ["snaps", "orientation"] {
            for entry in try FileWalker.regularFiles(under: Fixtures.sample(folder)).files {
                let source = try InputFile.read(entry.path, limit: settings.limits.maxInputBytes)
                var snap = Snap(source: source, settings: settings)
                guard (try? Pipeline.run(BenchmarkSupport.stage(through: "square"), on: &snap)) != nil,
                      let header = snap.header, min(header.width, header.height) >= 100 else { continue }
                squares.append((entry.relativePath, snap.square))
            }
        }
        return squares
    }

    @Test("fills ≥ 95 % of the budget on average where the image needs it, never over, in ≤ 2 encodes on average",
          arguments: [JPEG.Chroma.c444, .c420])
    func realPhotos(chroma: JPEG.Chroma) throws {
        var settings = Settings.SquareSettings()
        settings.chroma = chroma
        var encodes: [Int] = []
        var fills: [Double] = []
        let squares = try Self.squares()
        #expect(squares.count >= 12)
        for (name, rgb) in squares {
            for limit in [4096, 3072, 2300, 1500] {
                settings.budget = limit
                let fitted = try JPEGBudgetSearch.fitSquare(rgb: rgb, side: 100, settings: settings, budget: Budget(limit: limit, mode: .bytes))
                #expect(fitted.bytes.count <= limit, "\(name) at \(limit)")
                let plan = try JPEG.Plan(rgb: rgb, width: 100, height: 100, chroma: chroma)
                #expect(fitted.bytes == (try plan.write(quality: fitted.quality!)))
                encodes.append(fitted.encodes)
                let top = try plan.write(quality: 100).count
                if top > limit { fills.append(Double(fitted.bytes.count) / Double(limit)) }
            }
        }
        let meanEncodes = Double(encodes.reduce(0, +)) / Double(encodes.count)
        let meanFill = fills.reduce(0, +) / Double(fills.count)
        #expect(meanEncodes <= 2, "mean encodes \(meanEncodes): \(encodes)")
        #expect(meanFill >= 0.95, "mean fill \(meanFill): \(fills)")
    }

    @Test("the default range reaches quality 100 when the image is simple enough")
    func reachesTop() throws {
        // A faint gradient: tiny at every quality.
        var rgb = [UInt8](repeating: 0, count: 100 * 100 * 3)
        for i in 0..<(100 * 100) { rgb[i * 3] = UInt8(100 + i % 100 / 10); rgb[i * 3 + 1] = 120; rgb[i * 3 + 2] = 90 }
        let fitted = try JPEGBudgetSearch.fitSquare(rgb: rgb, side: 100, settings: Settings.SquareSettings(), budget: Budget(limit: 4096, mode: .bytes))
        #expect(fitted.quality == 100)
    }
}
