import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@_spi(Benchmarks) @testable import SnapThumbCore
import FaceKit
import SystemKit
import VipsKit

/// Faces first (issue 38): the detector, where the square goes, what the manifest says,
/// and what the drawn grid does with faces. The people samples are real faces (scikit-image's
/// astronaut, public domain) with known boxes (docs/samples.md).
@Suite("Faces")
struct FaceTests {
    /// Known face boxes in the samples' own pixels (Benchmarks/quality/make_people.py placed them).
    static let sidePerson = FaceBox(x: 778.4, y: 383.6, width: 119.5, height: 150)
    static let tallPortrait = FaceBox(x: 261.7, y: 134.8, width: 135.4, height: 170)

    static func rgb(_ sample: String) throws -> (pixels: [UInt8], width: Int, height: Int) {
        let image = try Pixels(encoded: Fixtures.bytes(Fixtures.sample(sample)))
        return (image.data, image.width, image.height)
    }

    static func overlap(_ a: FaceBox, _ b: FaceBox) -> Double {
        let w = max(0, min(a.x + a.width, b.x + b.width) - max(a.x, b.x))
        let h = max(0, min(a.y + a.height, b.y + b.height) - max(a.y, b.y))
        return w * h / (a.area + b.area - w * h)
    }

    @Test("the detector finds the known face in each people sample, the same boxes every time",
          arguments: [("people/side-person.jpg", sidePerson), ("people/tall-portrait.jpg", tallPortrait),
                      ("people/astronaut.jpg", FaceBox(x: 178, y: 63, width: 90, height: 113))])
    func finds(sample: String, known: FaceBox) throws {
        let image = try Self.rgb(sample)
        let faces = try FaceDetector.detect(rgb: image.pixels, width: image.width, height: image.height)
        #expect(faces.count == 1, "\(sample): \(faces)")
        #expect(faces.first.map { Self.overlap($0, known) > 0.5 } == true, "\(sample): \(faces) against \(known)")
        #expect(try FaceDetector.detect(rgb: image.pixels, width: image.width, height: image.height) == faces)
    }

    /// group-wide.jpg (1440×720): a large face, a smaller one beside it, another far to the right.
    static let group = [FaceBox(x: 236.5, y: 250.3, width: 126.2, height: 158.4),
                        FaceBox(x: 656.2, y: 365.2, width: 86, height: 108),
                        FaceBox(x: 1286.2, y: 325.2, width: 86, height: 108)]

    @Test("a group along a wide photo: every face found; the square keeps the largest and its neighbour, not the far one")
    func groupWide() throws {
        let image = try Self.rgb("people/group-wide.jpg")
        let faces = try FaceDetector.detect(rgb: image.pixels, width: image.width, height: image.height)
        #expect(faces.count == 3, "\(faces)")
        for known in Self.group { #expect(faces.contains { Self.overlap($0, known) > 0.5 }, "\(known) in \(faces)") }
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("people/group-wide.jpg")))
        let crop = try #require(upload.manifest.crop)
        #expect(crop.source == .faces && crop.faces == 3 && crop.top == 0 && crop.width == 720, "\(crop)")
        let inside = Self.group.map { FaceSquare.inside($0, left: Double(crop.left ?? -1), top: 0, side: 720) }
        #expect(inside[0] >= 0.9 && inside[1] >= 0.9 && inside[2] < 0.1, "\(inside) at \(crop)")
        // The largest face alone would have put the square at the left edge, cutting its neighbour.
        #expect(FaceSquare.inside(Self.group[1], left: 0, top: 0, side: 720) < 0.9)
    }

    @Test("the reduction keeps the photo: the same photo with every pixel doubled finds the same faces, twice as large")
    func doubledPhoto() throws {
        for sample in ["people/side-person.jpg", "people/group-wide.jpg"] {
            let image = try Self.rgb(sample)
            var doubled = [UInt8](repeating: 0, count: image.pixels.count * 4)
            for y in 0..<(image.height * 2) {
                for x in 0..<(image.width * 2) {
                    let from = ((y / 2) * image.width + x / 2) * 3, to = (y * image.width * 2 + x) * 3
                    doubled[to] = image.pixels[from]; doubled[to + 1] = image.pixels[from + 1]; doubled[to + 2] = image.pixels[from + 2]
                }
            }
            let faces = try FaceDetector.detect(rgb: image.pixels, width: image.width, height: image.height)
            let large = try FaceDetector.detect(rgb: doubled, width: image.width * 2, height: image.height * 2)
            #expect(!faces.isEmpty && large.count == faces.count, "\(sample): \(faces) and \(large)")
            // Each reduction gives the network the same pixels but for the last bit of a float, and each
            // box is rounded to whole pixels: a pixel apart at most, at the large size.
            for (a, b) in zip(faces, large) {
                let scaled = a.scaled(2)
                #expect(abs(scaled.x - b.x) <= 2.5 && abs(scaled.y - b.y) <= 2.5 && abs(scaled.width - b.width) <= 2.5
                        && abs(scaled.height - b.height) <= 2.5 && abs(a.score - b.score) <= 0.002, "\(sample): \(a) ×2 against \(b)")
            }
        }
    }

    @Test("the same boxes whatever shapes the thread met before (one network per input shape)")
    func shapesInTurn() throws {
        let tall = try Self.rgb("people/tall-portrait.jpg"), wide = try Self.rgb("people/side-person.jpg")
        let square = try Self.rgb("people/astronaut.jpg"), group = try Self.rgb("people/group-wide.jpg")
        func detect(_ i: (pixels: [UInt8], width: Int, height: Int)) throws -> [FaceBox] {
            try FaceDetector.detect(rgb: i.pixels, width: i.width, height: i.height)
        }
        let first = try [tall, wide, square, group].map(detect)
        // Five shapes in turn on one thread: more than the networks kept, so one is set up again.
        let small = try FaceDetector.detect(rgb: tall.pixels, width: tall.width, height: tall.height, inputShort: 96)
        for _ in 0..<2 {
            #expect(try [group, square, wide, tall].map(detect) == first.reversed())
            #expect(try FaceDetector.detect(rgb: tall.pixels, width: tall.width, height: tall.height, inputShort: 96) == small)
        }
    }

    @Test("the skin gate: a black-and-white photo is still searched; a colour photo without skin-coloured regions is not")
    func skinGate() throws {
        let image = try Self.rgb("people/side-person.jpg")
        // Black and white: no colour to tell skin by, so the network runs and finds the face.
        var grey = image.pixels
        for p in stride(from: 0, to: grey.count, by: 3) {
            let r = 299 * Int(grey[p]), g = 587 * Int(grey[p + 1]), b = 114 * Int(grey[p + 2])
            let y = UInt8((r + g + b) / 1000)
            grey[p] = y; grey[p + 1] = y; grey[p + 2] = y
        }
        let greyFaces = try FaceDetector.detect(rgb: grey, width: image.width, height: image.height)
        #expect(greyFaces.count == 1 && Self.overlap(greyFaces[0], Self.sidePerson) > 0.5, "\(greyFaces)")
        // The same photo with red and blue swapped: the face turns blue-violet, nothing is
        // skin-coloured, and the photo is not given to the network (the gate's limit: a face
        // under a strong blue cast is not looked for).
        var swapped = image.pixels
        for p in stride(from: 0, to: swapped.count, by: 3) { swapped.swapAt(p, p + 2) }
        #expect(try FaceDetector.detect(rgb: swapped, width: image.width, height: image.height).isEmpty)
    }

    @Test("no face in the samples without people", arguments: ["snaps/phone-portrait.jpg", "snaps/landscape.webp", "snaps/adobe-rgb.jpg",
                                                                "snaps/display-p3.jpg", "orientation/upright.png", "snaps/grey.jpg"])
    func noFalseFace(sample: String) throws {
        let image = try Pixels(encoded: Fixtures.bytes(Fixtures.sample(sample)))
        guard image.bands == 3 else { return }
        #expect(try FaceDetector.detect(rgb: image.data, width: image.width, height: image.height).isEmpty)
    }

    @Test("bad arguments are an error, not a crash")
    func badArguments() {
        #expect(throws: FaceDetectorError.self) { try FaceDetector.detect(rgb: [0, 0, 0], width: 1, height: 1, inputShort: 8) }
    }

    @Test("the square: all faces when they fit, else the largest with those that fit beside it; centred on them, inside the image")
    func placement() {
        #expect(FaceSquare.place(faces: [], width: 300, height: 400) == nil)
        // One face near the top of a portrait: the square starts at the top.
        #expect(FaceSquare.place(faces: [FaceBox(x: 100, y: 10, width: 50, height: 60)], width: 300, height: 400)! == (0, 0, 300))
        // Near the right of a landscape: the square ends at the right edge.
        #expect(FaceSquare.place(faces: [FaceBox(x: 500, y: 100, width: 60, height: 60)], width: 600, height: 300)! == (300, 0, 300))
        // Two faces that fit: centred on both (their extent 100…300, centre 200).
        #expect(FaceSquare.place(faces: [FaceBox(x: 100, y: 50, width: 40, height: 40), FaceBox(x: 260, y: 50, width: 40, height: 40)],
                                 width: 1000, height: 200)! == (100, 0, 200))
        // Two that do not fit: the larger one, centred (650 + 40 − 100).
        #expect(FaceSquare.place(faces: [FaceBox(x: 10, y: 50, width: 30, height: 30), FaceBox(x: 650, y: 50, width: 80, height: 80)],
                                 width: 1000, height: 200)! == (590, 0, 200))
        // Three that do not fit: the largest and the one that fits beside it (560…730, centre 645),
        // not the largest alone (590) and not the far one.
        #expect(FaceSquare.place(faces: [FaceBox(x: 10, y: 50, width: 30, height: 30), FaceBox(x: 650, y: 50, width: 80, height: 80),
                                         FaceBox(x: 560, y: 40, width: 30, height: 30)], width: 1000, height: 200)! == (545, 0, 200))
        // A group along a tall photo: the largest face with the two small ones below it.
        #expect(FaceSquare.place(faces: [FaceBox(x: 20, y: 700, width: 40, height: 40), FaceBox(x: 100, y: 100, width: 90, height: 90),
                                         FaceBox(x: 30, y: 230, width: 40, height: 40), FaceBox(x: 150, y: 300, width: 40, height: 40)],
                                 width: 300, height: 1000)! == (0, 70, 300))
        #expect(FaceSquare.inside(FaceBox(x: 0, y: 0, width: 10, height: 10), left: 5, top: 0, side: 100) == 0.5)
    }

    @Test("a person at the side of a wide photo stays in the square; the manifest says faces and where")
    func sidePersonCrop() throws {
        let bytes = try Fixtures.bytes(Fixtures.sample("people/side-person.jpg"))
        let upload = try Fixtures.process(bytes)
        let crop = try #require(upload.manifest.crop)
        #expect(crop.source == .faces && crop.faces == 1)
        #expect(crop.width == 720 && crop.height == 720 && crop.top == 0)
        let inside = FaceSquare.inside(Self.sidePerson, left: Double(crop.left!), top: 0, side: 720)
        #expect(inside >= 0.9, "face \(inside) inside the square at \(crop)")
        // The centre square (what --faces off cuts) loses most of the face.
        #expect(FaceSquare.inside(Self.sidePerson, left: 120, top: 0, side: 720) < 0.6)
        let off = try Fixtures.process(bytes) { $0.square.faces = false }
        #expect(off.manifest.crop == CropInfo(source: .centre, left: 120, top: 0, width: 720, height: 720))
        #expect(off.manifest.recipe.digest != upload.manifest.recipe.digest)
        #expect(Fixtures.blob(off, "square100") != Fixtures.blob(upload, "square100"))
        // Deterministic, and the manifest's own JSON is JSONEncoder's.
        #expect(try Fixtures.process(bytes).manifest == upload.manifest)
        #expect(upload.manifest.json() == upload.manifest.encoderJSON())
    }

    @Test("a tall portrait keeps the head; attention is the fallback when there is no face")
    func tallAndFallback() throws {
        let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("people/tall-portrait.jpg")))
        let crop = try #require(upload.manifest.crop)
        #expect(crop.source == .faces && crop.left == 0 && crop.width == 600)
        #expect(FaceSquare.inside(Self.tallPortrait, left: 0, top: Double(crop.top!), side: 600) >= 0.9)
        let attention = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg"))) { $0.square.crop = .attention }
        // libvips says where attention cut (its thumbnail's offsets): the rectangle in the original.
        let cut = try #require(attention.manifest.crop)
        #expect(cut.source == .attention && cut.faces == 0 && cut.left == 0 && cut.width == 1080 && cut.height == 1080)
        #expect((0...360).contains(cut.top ?? -1), "\(cut)")
        let wide = try Fixtures.process(Fixtures.bytes(Fixtures.sample("people/side-person.jpg"))) {
            $0.square.crop = .attention; $0.square.faces = false
        }
        let wideCut = try #require(wide.manifest.crop)
        let wideLeft = wideCut.left ?? -1
        #expect((200...260).contains(wideLeft), "libvips' own smartcrop of the full image cuts at 240: \(wideCut)")
        #expect(wideCut.top == 0 && wideCut.width == 720)
        let centre = try Fixtures.process(Fixtures.bytes(Fixtures.sample("snaps/phone-portrait.jpg")))
        #expect(centre.manifest.crop == CropInfo(source: .centre, left: 0, top: 180, width: 1080, height: 1080, faces: 0))
    }

    @Test("with faces, pixel100 is still pixel25 ×4 and every style stays in budget")
    func pixelArtWithFaces() throws {
        for style in Settings.PixelStyle.allCases {
            let upload = try Fixtures.process(Fixtures.bytes(Fixtures.sample("people/side-person.jpg"))) { $0.pixel.style = style }
            let small = try Pixels(encoded: Fixtures.blob(upload, "pixel25")), large = try Pixels(encoded: Fixtures.blob(upload, "pixel100"))
            for y in 0..<100 { for x in 0..<100 where large.pixel(x, y) != small.pixel(x / 4, y / 4) { Issue.record("\(style) \(x),\(y)"); return } }
            for (name, variant) in upload.manifest.variants { #expect(variant.bytes <= variant.budget ?? .max, "\(style) \(name)") }
        }
    }

    @Test("face cells lean to their lighter group: hair and shadow do not win a face's cells, and the face keeps its area average's lightness")
    func faceCellsLight() {
        // A 4×4-cell square: in each cell three columns of dark pixels (hair) and one of skin,
        // so the plain drawn cell is hair.
        let side = 16
        var rgb = [UInt8](repeating: 0, count: side * side * 3)
        for y in 0..<side { for x in 0..<side {
            let v: [UInt8] = x % 4 < 3 ? [40, 30, 25] : [225, 180, 150]
            rgb.replaceSubrange((y * side + x) * 3..<(y * side + x) * 3 + 3, with: v)
        } }
        var unheld = DrawnGrid.Lift.drawn
        unheld.driftLimit = nil
        let plain = OKLab.image(rgb: DrawnGrid.cells(rgb: rgb, side: side, factor: 4, lift: unheld))
        let face = OKLab.image(rgb: DrawnGrid.cells(rgb: rgb, side: side, factor: 4, lift: .drawn,
                                                    faces: [DrawnGrid.FaceCells(x0: 0, y0: 0, x1: 4, y1: 4)]))
        let average = DrawnGrid.areaAverage(rgb: rgb, side: side, factor: 4)
        #expect(plain.allSatisfy { $0.l < 0.3 }, "\(plain.map(\.l))")
        // One skin tone, as light as the face's area average (not the hair's, not paler).
        #expect(Set(face.map { [$0.l, $0.a, $0.b] }).count == 1, "\(face)")
        #expect(abs(face[0].l - average[0].l) < 0.01, "\(face[0].l) against the area average \(average[0].l)")
        #expect(face.allSatisfy { $0.l > plain[0].l + 0.1 }, "\(face.map(\.l)) against the hair \(plain[0].l)")
    }

    @Test("drawn is held to its drift limit on a busy picture and left as lifted on a calm one; retro is not held")
    func driftLimit() {
        let side = 100
        // Busy: every cell holds an edge (2×2-pixel checks of dark and light, tinted).
        var busy = [UInt8](repeating: 0, count: side * side * 3), calm = busy
        for y in 0..<side { for x in 0..<side {
            let i = (y * side + x) * 3
            let v: [UInt8] = (x / 2 + y / 2) % 2 == 0 ? [30, 40, 60] : [230, 200, 150]
            busy.replaceSubrange(i..<i + 3, with: v)
            calm.replaceSubrange(i..<i + 3, with: [UInt8(80 + x), UInt8(90 + y), 140])
        } }
        func drift(_ rgb: [UInt8], _ lift: DrawnGrid.Lift) -> Double {
            let cells = OKLab.image(rgb: DrawnGrid.cells(rgb: rgb, side: side, factor: 4, lift: lift))
            let average = DrawnGrid.areaAverage(rgb: rgb, side: side, factor: 4)
            return zip(cells, average).reduce(0) { $0 + $1.0.distance($1.1) } / Double(cells.count)
        }
        var unheld = DrawnGrid.Lift.drawn
        unheld.driftLimit = nil
        #expect(drift(busy, unheld) > 0.06, "the busy picture must drift unheld for this test to mean anything")
        // The limit is on the unrounded colours; rounding to 8 bits moves a cell by about 0.002.
        #expect(drift(busy, .drawn) <= DrawnGrid.driftLimit + 0.003, "\(drift(busy, .drawn))")
        #expect(DrawnGrid.cells(rgb: calm, side: side, factor: 4, lift: .drawn) == DrawnGrid.cells(rgb: calm, side: side, factor: 4, lift: unheld))
        #expect(drift(busy, .retro) > DrawnGrid.driftLimit + 0.003)
    }

    @Test("a face's skin tone keeps the face's own hue: a pale highlight in every cell does not tint it")
    func skinHue() {
        // Every cell: three columns of skin, one of a pale yellow highlight (the lighter group).
        let side = 16
        var rgb = [UInt8](repeating: 0, count: side * side * 3)
        for y in 0..<side { for x in 0..<side {
            let v: [UInt8] = x % 4 < 3 ? [225, 170, 140] : [250, 245, 190]
            rgb.replaceSubrange((y * side + x) * 3..<(y * side + x) * 3 + 3, with: v)
        } }
        let pixels = OKLab.image(rgb: rgb)
        let mean = pixels.reduce(.zero, +) / Double(pixels.count)
        let face = OKLab.image(rgb: DrawnGrid.cells(rgb: rgb, side: side, factor: 4, lift: .drawn,
                                                    faces: [DrawnGrid.FaceCells(x0: 0, y0: 0, x1: 4, y1: 4)]))
        let light = DrawnGrid.representative(Array(pixels.prefix(4)), lighter: true)
        // The lighter group alone would move the hue this far: the test can tell.
        #expect(abs((mean + light).a / 2 - mean.a) > 0.01 || abs((mean + light).b / 2 - mean.b) > 0.01)
        for cell in face {
            #expect(abs(cell.a - mean.a) < 0.006 && abs(cell.b - mean.b) < 0.006, "\(cell) against the face's mean \(mean)")
            #expect(cell.l >= mean.l - 0.01, "not darker than the face: \(cell.l) against \(mean.l)")
        }
    }

    @Test("a lone dark cell on a flat field is neither outlined nor kept; a dark line is outlined")
    func isolatedAndContinuing() {
        let n = 9
        var grid = [OKLab](repeating: OKLab(l: 0.7, a: 0.02, b: 0.02), count: n * n)
        grid[2 * n + 2] = OKLab(l: 0.3, a: 0.02, b: 0.02)
        for x in 0..<n { grid[6 * n + x] = OKLab(l: 0.3, a: 0.02, b: 0.02) }
        let l = DrawnGrid.liftedLightness(grid, side: n, lift: .drawn)
        #expect(l[2 * n + 2] > 0.6, "the speckle takes its neighbours' lightness: \(l[2 * n + 2])")
        #expect(l[6 * n + 4] < 0.19, "the line is outlined: \(l[6 * n + 4])")
    }
}
