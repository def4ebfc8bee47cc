import ArgumentParser
import Foundation
import SnapThumbCore
import VipsKit

/// Flags shared by every command that runs the pipeline. Precedence: built-in
/// defaults, then the `--config` file, then these flags.
struct PipelineOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("JSON config file with any Settings fields (see README: Configuration).", valueName: "file"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("Side of the square JPEG thumbnail, pixels. [default: 100]", valueName: "px"))
    var squareSize: Int?

    @Option(name: .long, help: ArgumentHelp("How the square is cut: centre or attention (libvips' interest measure). [default: centre]", valueName: "mode"))
    var crop: String?

    @Option(name: .long, help: ArgumentHelp("Byte budget of the square JPEG, or 'none'. [default: 4096]", valueName: "bytes"))
    var budget: String?

    @Option(name: .long, help: ArgumentHelp("What budgets count: bytes, or inline (base64 length, for push payloads). [default: bytes]", valueName: "mode"))
    var budgetMode: String?

    @Option(name: .long, help: ArgumentHelp("In --budget-mode inline: bytes of the whole push payload the square travels in (APNs: 4096). [default: 4096]", valueName: "bytes"))
    var payloadLimit: Int?

    @Option(name: .long, help: ArgumentHelp("In --budget-mode inline: payload bytes kept for everything but the thumbnail (a Live Activity start payload's fields, names, caption, alert). [default: \(Settings.defaultPayloadReserve)]", valueName: "bytes"))
    var payloadReserve: Int?

    @Option(name: .long, help: ArgumentHelp("A key that already has a manifest of other source bytes: refuse (failure 'conflict') or replace. Also SNAPTHUMB_ON_CONFLICT. [default: refuse]", valueName: "action"))
    var onConflict: String?

    @Option(name: .long, help: ArgumentHelp("Lowest JPEG quality before the thumbnail counts as degraded. [default: 40]", valueName: "q"))
    var qualityMin: Int?

    @Option(name: .long, help: ArgumentHelp("Highest JPEG quality tried. [default: 100]", valueName: "q"))
    var qualityMax: Int?

    @Option(name: .long, help: ArgumentHelp("Chroma subsampling of the square JPEG: 444 (full) or 420 (halved). [default: 444]", valueName: "444|420"))
    var chroma: String?

    @Option(name: .long, help: ArgumentHelp("Pixel-art grid: pixel25 is grid×grid cells. [default: 25]", valueName: "cells"))
    var grid: Int?

    @Option(name: .long, help: ArgumentHelp("Pixel-art palette size, 2–256. [default: 16]", valueName: "n"))
    var colours: Int?

    @Option(name: .long, help: ArgumentHelp("adaptive (libimagequant), pico8, gameboy, mono, or a list like '#000000,#FFFFFF'. [default: adaptive]", valueName: "palette"))
    var palette: String?

    @Flag(name: .long, inversion: .prefixedNo, help: "Floyd–Steinberg dithering in the pixel art. [default: off]")
    var dither: Bool?

    @Option(name: .long, help: ArgumentHelp("pixel100 = pixel25 enlarged by this factor (nearest neighbour). [default: 4]", valueName: "n"))
    var pixelScale: Int?

    @Option(name: .long, help: ArgumentHelp("Byte budget of pixel100, or 'none'. [default: 4096]", valueName: "bytes"))
    var pixelBudget: String?

    @Option(name: .long, help: ArgumentHelp("Byte budget of pixel25, or 'none'. [default: 4096]", valueName: "bytes"))
    var gridBudget: String?

    @Option(name: .long, help: ArgumentHelp("Colour behind transparent pixels. [default: #0A0A1A]", valueName: "#RRGGBB"))
    var background: String?

    @Option(name: .long, help: ArgumentHelp("Refuse inputs larger than this many bytes (too-large). [default: 67108864 = 64 MiB]", valueName: "bytes"))
    var maxBytes: Int?

    @Option(name: .long, help: ArgumentHelp("Refuse images with more pixels than this (too-large). [default: 100000000]", valueName: "pixels"))
    var maxPixels: Int?

    @Option(name: .long, help: ArgumentHelp("Lower pixel limit for images decoded whole: HEIC/AVIF, progressive JPEG, interlaced PNG (too-large). [default: 50000000]", valueName: "pixels"))
    var maxPixelsFullDecode: Int?

    @Option(name: .long, help: ArgumentHelp("Decoder strictness: truncated, error or warning (refuses damaged files). [default: warning]", valueName: "level"))
    var failOn: String?

    /// The validated settings, or a `ValidationError` that says what is wrong and what is allowed.
    func settings() throws -> Settings {
        var settings = Settings()
        if let config {
            let data = try Self.readConfig(config)
            do {
                // The "watch" object is `watch`'s own (WatchCommand reads it).
                var document = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
                document["watch"] = nil
                settings = try JSONDecoder().decode(Settings.self, from: JSONSerialization.data(withJSONObject: document))
            } catch let error as SnapError {
                throw ValidationError("config file \(config): \(error.message)")
            } catch let DecodingError.typeMismatch(type, context), let DecodingError.valueNotFound(type, context) {
                throw ValidationError("config file \(config): \(context.codingPath.map(\.stringValue).joined(separator: ".")) must be \(type)")
            } catch {
                throw ValidationError("config file \(config) is not valid JSON settings: \(error.localizedDescription)")
            }
        }
        if let squareSize { settings.square.size = squareSize }
        if let crop {
            guard let mode = CropMode(rawValue: crop) else {
                throw ValidationError("--crop must be one of \(CropMode.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(crop)')")
            }
            settings.square.crop = mode
        }
        if let budget { settings.square.budget = try parseBudget(budget, flag: "--budget") }
        if let budgetMode {
            guard let mode = Settings.BudgetMode(rawValue: budgetMode) else {
                throw ValidationError("--budget-mode must be bytes or inline (got '\(budgetMode)')")
            }
            settings.budgetMode = mode
        }
        if let payloadLimit { settings.payloadLimit = payloadLimit }
        if let payloadReserve { settings.payloadReserve = payloadReserve }
        if let (text, source) = onConflict.map({ ($0, "--on-conflict") })
            ?? ProcessInfo.processInfo.environment["SNAPTHUMB_ON_CONFLICT"].map({ ($0, "SNAPTHUMB_ON_CONFLICT") }) {
            guard let policy = ConflictPolicy(rawValue: text.lowercased()) else {
                throw ValidationError("\(source) must be refuse or replace (got '\(text)')")
            }
            settings.onConflict = policy
        }
        if let qualityMin { settings.square.qualityMin = qualityMin }
        if let qualityMax { settings.square.qualityMax = qualityMax }
        if let chroma {
            guard let value = JPEG.Chroma(rawValue: chroma) else {
                throw ValidationError("--chroma must be 444 or 420 (got '\(chroma)')")
            }
            settings.square.chroma = value
        }
        if let grid { settings.pixel.grid = grid }
        if let colours { settings.pixel.colours = colours }
        if let palette {
            do { settings.pixel.palette = try PaletteChoice(parsing: palette) } catch let error as SnapError {
                throw ValidationError("--palette: \(error.message)")
            }
        }
        if let dither { settings.pixel.dither = dither }
        if let pixelScale { settings.pixel.scale = pixelScale }
        if let pixelBudget { settings.pixel.budget = try parseBudget(pixelBudget, flag: "--pixel-budget") }
        if let gridBudget { settings.pixel.gridBudget = try parseBudget(gridBudget, flag: "--grid-budget") }
        if let background {
            guard let colour = Colour(hex: background) else {
                throw ValidationError("--background must be a colour written #RRGGBB, e.g. #0A0A1A (got '\(background)')")
            }
            settings.background = colour
        }
        if let maxBytes { settings.limits.maxInputBytes = maxBytes }
        if let maxPixels { settings.limits.maxPixels = maxPixels }
        if let maxPixelsFullDecode { settings.limits.maxPixelsFullDecode = maxPixelsFullDecode }
        if let failOn {
            guard let level = Settings.FailOn(rawValue: failOn) else {
                throw ValidationError("--fail-on must be one of truncated, error, warning (got '\(failOn)')")
            }
            settings.failOn = level
        }
        do { try settings.validate() } catch let error as SnapError { throw ValidationError(error.message) }
        return settings
    }

    /// A config file's bytes, checked to be strict JSON (no trailing commas or
    /// duplicate keys); the error names the file, line and column.
    static func readConfig(_ path: String) throws -> Data {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read config file \(path)")
        }
        do { try StrictJSON.check(data) } catch let error as SnapError {
            throw ValidationError("config file \(path):\(error.message)")
        }
        return data
    }

    private func parseBudget(_ text: String, flag: String) throws -> Int? {
        if text.lowercased() == "none" { return nil }
        guard let value = Int(text) else { throw ValidationError("\(flag) must be a number of bytes or 'none' (got '\(text)')") }
        return value
    }

    /// Starts the pipeline, turning failures into a usage error.
    func pipeline() throws -> Pipeline {
        let settings = try settings()
        do { return try Pipeline(settings: settings) } catch let error as SnapError { throw ValidationError(error.message) }
    }
}

/// Writes a line to stderr.
func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Writes a line to stdout, flushing so that pipes see one JSON line per upload promptly.
func printOut(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
