#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import SnapThumbCore
import SnapThumbStore
import SystemKit
import VipsKit
import SnapThumbVerify

/// Paths and helpers shared by the tests.
public enum Fixtures {
    /// The repository root (this file is Sources/SnapThumbTesting/Fixtures.swift).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    public static func sample(_ relative: String) -> String { "\(root)/Samples/\(relative)" }

    /// An executable of this package (`snapthumb`, `runner-test-worker`): the one built beside the
    /// running test bundle, else the debug build's.
    public static func builtProduct(_ name: String) -> String {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: beside) { return beside }
        return "\(root)/.build/debug/\(name)"
    }

    public static func bytes(_ path: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw SnapError(.io, "cannot read fixture \(path)") }
        return [UInt8](data)
    }

    /// A fresh temporary directory, removed by the caller's `defer`.
    public static func tempDirectory(_ name: String = "snapthumb-test") -> String {
        let path = NSTemporaryDirectory() + "\(name)-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    public static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    /// The pid of a process that has exited and been reaped: what a dead worker's claim or
    /// temp name carries.
    public static func deadPID() throws -> Int32 {
        let p = try SpawnedProcess("/bin/true", [])
        p.wait()
        return p.processIdentifier
    }

    public static func pipeline(_ edit: (inout Settings) -> Void = { _ in }) throws -> Pipeline {
        var settings = Settings()
        edit(&settings)
        return try Pipeline(settings: settings)
    }

    /// Runs the pipeline on bytes. Every manifest a test makes this way is also
    /// checked against the published JSON Schema, so that the writer and the schema
    /// cannot drift apart on any input the suite uses.
    public static func process(_ bytes: [UInt8], key: String = "test.jpg", _ edit: (inout Settings) -> Void = { _ in }) throws -> ProcessedUpload {
        let upload = try pipeline(edit).process(SourceBuffer(bytes), key: key)
        let problems = schema.validate(upload.manifest.json(pretty: true))
        #expect(problems == [], "manifest of \(key) fails the schema")
        return upload
    }

    /// The manifest schema SnapThumb ships (the same resource `verify` uses).
    public static let schema = try! ManifestSchema.validator()

    /// The blob of a variant.
    public static func blob(_ upload: ProcessedUpload, _ variant: String) -> [UInt8] {
        let hex = String(upload.manifest.variants[variant]!.digest.dropFirst("sha256:".count))
        return upload.blobs.first { $0.hex == hex }!.bytes
    }

    /// A JPEG made by libvips from generated pixels (a gradient with a bright block top-left).
    public static func syntheticJPEG(width: Int = 320, height: Int = 240, quality: Int = 90) throws -> [UInt8] {
        try VImage.fromRGB(syntheticRGB(width: width, height: height), width: width, height: height).jpeg(quality: quality)
    }

    public static func syntheticRGB(width: Int, height: Int) -> [UInt8] {
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                let block = x < width / 3 && y < height / 3
                rgb[i] = block ? 230 : UInt8(x * 255 / width)
                rgb[i + 1] = block ? 40 : UInt8(y * 255 / height)
                rgb[i + 2] = UInt8((x + y) % 256)
            }
        }
        return rgb
    }
}

/// Decoded pixels of an encoded image, 8-bit.
public struct Pixels {
    public let width: Int, height: Int, bands: Int
    public let data: [UInt8]

    public init(encoded bytes: [UInt8]) throws {
        let image = try VImage.load(SourceBuffer(bytes), options: "")
        width = image.width; height = image.height; bands = image.bands
        data = try image.pixels()
    }

    public init(image: VImage) throws {
        width = image.width; height = image.height; bands = image.bands
        data = try image.pixels()
    }

    public func pixel(_ x: Int, _ y: Int) -> [Int] {
        let i = (y * width + x) * bands
        return (0..<bands).map { Int(data[i + $0]) }
    }

    /// Mean absolute difference per channel against another image of the same size.
    public func meanDifference(_ other: Pixels) -> Double {
        precondition(width == other.width && height == other.height && bands == other.bands, "sizes differ")
        var total = 0
        for i in 0..<data.count { total += abs(Int(data[i]) - Int(other.data[i])) }
        return Double(total) / Double(data.count)
    }

    /// Mean absolute difference of `cells`×`cells` block averages: compares
    /// colour region by region while ignoring texture, noise and resampling.
    public func blockDifference(_ other: Pixels, cells: Int = 10) -> Double {
        let a = blockMeans(cells), b = other.blockMeans(cells)
        return zip(a, b).map { abs($0 - $1) }.reduce(0, +) / Double(a.count)
    }

    public func blockMeans(_ cells: Int) -> [Double] {
        var sums = [Double](repeating: 0, count: cells * cells * bands)
        var counts = [Double](repeating: 0, count: cells * cells)
        for y in 0..<height {
            for x in 0..<width {
                let cell = (y * cells / height) * cells + x * cells / width
                counts[cell] += 1
                for b in 0..<bands { sums[cell * bands + b] += Double(data[(y * width + x) * bands + b]) }
            }
        }
        return sums.enumerated().map { $0.element / max(1, counts[$0.offset / bands]) }
    }

    /// Mean of each band.
    public var means: [Double] {
        (0..<bands).map { b in
            var sum = 0
            for i in stride(from: b, to: data.count, by: bands) { sum += Int(data[i]) }
            return Double(sum) / Double(width * height)
        }
    }

    public var colours: Set<[UInt8]> {
        var set = Set<[UInt8]>()
        for i in stride(from: 0, to: data.count, by: bands) { set.insert(Array(data[i..<i + bands])) }
        return set
    }
}

/// JPEG marker segments (APPn, COM, …) up to the start of scan.
public func jpegMarkers(_ bytes: [UInt8]) -> [UInt8] {
    var markers: [UInt8] = []
    var i = 2
    while i + 4 <= bytes.count, bytes[i] == 0xFF {
        let marker = bytes[i + 1]
        markers.append(marker)
        if marker == 0xDA { break }
        let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
        i += 2 + length
    }
    return markers
}

/// PNG chunk types in order.
public func pngChunks(_ bytes: [UInt8]) -> [String] {
    var chunks: [String] = []
    var i = 8
    while i + 8 <= bytes.count {
        let length = Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
        chunks.append(String(decoding: bytes[i + 4..<i + 8], as: UTF8.self))
        i += 12 + length
    }
    return chunks
}

/// Finds a byte sequence.
public func contains(_ haystack: [UInt8], _ needle: String) -> Bool {
    let n = Array(needle.utf8)
    guard haystack.count >= n.count else { return false }
    for i in 0...(haystack.count - n.count) where haystack[i] == n[0] && Array(haystack[i..<i + n.count]) == n { return true }
    return false
}

/// Inserts an APP1 EXIF segment right after a JPEG's SOI.
public func insertingEXIF(_ jpeg: [UInt8], payload: [UInt8]) -> [UInt8] {
    let body = Array("Exif".utf8) + [0, 0] + payload
    let length = body.count + 2
    return [0xFF, 0xD8, 0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + body + jpeg[2...]
}

/// A little-endian TIFF header with one IFD0 entry: Orientation = value.
public func exifOrientation(_ value: UInt16) -> [UInt8] {
    var t: [UInt8] = Array("II".utf8) + [42, 0, 8, 0, 0, 0]
    t += [1, 0] // one entry
    t += [0x12, 0x01, 3, 0, 1, 0, 0, 0, UInt8(value & 0xFF), UInt8(value >> 8), 0, 0]
    t += [0, 0, 0, 0] // no next IFD
    return t
}

/// Creates a file at a byte-exact path (names that are not UTF-8 have no `String`).
public func createFile(bytes path: [UInt8], contents: [UInt8] = []) throws {
    let fd = (path + [0]).withUnsafeBufferPointer { p in
        p.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_TRUNC, 0o644) }
    }
    guard fd >= 0 else { throw SnapError(.io, "cannot create test file: errno \(errno)") }
    defer { close(fd) }
    guard POSIX.writeAll(fd, contents) == 0 else { throw SnapError(.io, "cannot write test file") }
}

public func makeDirectory(bytes path: [UInt8]) throws {
    let code = (path + [0]).withUnsafeBufferPointer { p in
        p.withMemoryRebound(to: CChar.self) { mkdir($0.baseAddress!, 0o755) }
    }
    guard code == 0 else { throw SnapError(.io, "cannot create test directory: errno \(errno)") }
}

