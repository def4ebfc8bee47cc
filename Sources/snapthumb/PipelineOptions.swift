import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

/// Flags shared by every command that runs the pipeline. Precedence: these flags, then
/// `SNAPTHUMB_<FLAG>` environment variables, then the config file (`--config` or
/// `SNAPTHUMB_CONFIG`), then the built-in defaults.
struct PipelineOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Config file: JSON with sections pipeline, store, watch, consume, backfill, log, s3, sqs, google (see README: Configuration). Every setting is also an environment variable, SNAPTHUMB_ and the flag's name (--square-size: SNAPTHUMB_SQUARE_SIZE); a flag wins over the variable, the variable over the file ('snapthumb config' shows where each came from). [env SNAPTHUMB_CONFIG]", valueName: "file"))
    var config: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Side of the square JPEG thumbnail, pixels. [default: 100]", valueName: "px"))
    var squareSize: String?

    @Option(name: .long, help: ArgumentHelp("How the square is cut: centre (or center) or attention (libvips' interest measure). [default: centre]", valueName: "mode"), completion: Completions.crop)
    var crop: String?

    @Option(name: .long, help: ArgumentHelp("Faces first: place the square (and keep the pixel art's faces light) around the faces a detector finds; --crop is the fallback when there are none. on or off. [default: on]", valueName: "on|off"), completion: Completions.faces)
    var faces: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Byte budget of the square JPEG, or 'none'. [default: 4096]", valueName: "bytes"), completion: Completions.budget)
    var budget: String?

    @Option(name: .long, help: ArgumentHelp("What budgets count: bytes, or inline (base64 length, for push payloads). [default: bytes]", valueName: "mode"), completion: Completions.budgetMode)
    var budgetMode: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("In --budget-mode inline: bytes of the whole push payload the square travels in (APNs: 4096). [default: 4096]", valueName: "bytes"))
    var payloadLimit: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("In --budget-mode inline: payload bytes kept for everything but the thumbnail (a Live Activity start payload's fields, names, caption, alert). [default: \(Settings.defaultPayloadReserve)]", valueName: "bytes"))
    var payloadReserve: String?

    @Option(name: .long, help: ArgumentHelp("A key that already has a manifest of other source bytes: refuse (failure 'conflict') or replace. [default: refuse]", valueName: "action"), completion: Completions.onConflict)
    var onConflict: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lowest JPEG quality before the thumbnail counts as degraded. [default: 40]", valueName: "q"))
    var qualityMin: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Highest JPEG quality tried. [default: 100]", valueName: "q"))
    var qualityMax: String?

    @Option(name: .long, help: ArgumentHelp("Chroma subsampling of the square JPEG: 444 (full) or 420 (halved). [default: 444]", valueName: "444|420"), completion: Completions.chroma)
    var chroma: String?

    @Option(name: .long, help: ArgumentHelp("Also make the square in a modern format, for clients that decode it (iOS 16+): avif or heic (4:4:4, the same pixels and budget as the JPEG; manifest variant square100-avif or square100-heic), or none. [default: none]", valueName: "avif|heic|none"), completion: Completions.modern)
    var modern: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("CPU effort of the --modern encoder, 0–9 (libaom speed 9 − effort; HEIC ignores it). [default: \(Settings.SquareSettings.defaultModernEffort)]", valueName: "0-9"))
    var modernEffort: String?

    @Option(name: .long, help: ArgumentHelp("Pixel-art style: drawn (each cell's representative colour, contrast and chroma lifted, OKLab palette), soft (block means, the look before 0.10), retro (PICO-8 unless --palette names another fixed palette, ordered dither, outline). [default: drawn]", valueName: "drawn|soft|retro"), completion: Completions.pixelStyle)
    var pixelStyle: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Pixel-art grid: pixel25 is grid×grid cells. [default: 25]", valueName: "cells"))
    var grid: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Pixel-art palette size, 2–256. [default: 16]", valueName: "n"))
    var colours: String?

    @Option(name: .long, help: ArgumentHelp("adaptive (libimagequant), pico8, gameboy, mono, or a list like '#000000,#FFFFFF'. [default: adaptive]", valueName: "palette"), completion: Completions.palette)
    var palette: String?

    @Flag(name: .long, inversion: .prefixedNo, help: "Dithering in the pixel art: ordered (Bayer) in the drawn and retro styles, Floyd–Steinberg in soft. [default: off]")
    var dither: Bool?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("pixel100 = pixel25 enlarged by this factor (nearest neighbour). [default: 4]", valueName: "n"))
    var pixelScale: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Byte budget of pixel100, or 'none'. [default: 4096]", valueName: "bytes"), completion: Completions.budget)
    var pixelBudget: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Byte budget of pixel25, or 'none'. [default: 4096]", valueName: "bytes"), completion: Completions.budget)
    var gridBudget: String?

    @Option(name: .long, help: ArgumentHelp("Colour behind transparent pixels. [default: #0A0A1A]", valueName: "#RRGGBB"))
    var background: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Refuse inputs larger than this many bytes (too-large). [default: 67108864 = 64 MiB]", valueName: "bytes"))
    var maxBytes: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Refuse images with more pixels than this (too-large). [default: 100000000]", valueName: "pixels"))
    var maxPixels: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Lower pixel limit for images decoded whole: HEIC/AVIF, progressive JPEG, interlaced PNG (too-large). [default: 50000000]", valueName: "pixels"))
    var maxPixelsFullDecode: String?

    @Option(name: .long, help: ArgumentHelp("Decoder strictness: truncated, error or warning (refuses damaged files). [default: warning]", valueName: "level"), completion: Completions.failOn)
    var failOn: String?

    /// One pipeline setting: its flag, its name in the file's pipeline section, how to apply a
    /// value given as text, and how to show the effective value.
    struct Entry {
        let flag: String
        let key: String
        let given: String?
        let apply: (inout Settings, String, SettingSource) throws -> Void
        let show: (Settings) -> String
    }

    /// Every pipeline setting. A new flag needs an entry here, and it then works from the
    /// command line, the environment and the file, and shows in `snapthumb config`.
    var entries: [Entry] {
        func count(_ minimum: Int, _ set: @escaping (inout Settings, Int) -> Void) -> (inout Settings, String, SettingSource) throws -> Void {
            { settings, text, source in set(&settings, try parseCount(text, minimum: minimum, source: source)) }
        }
        func budgetValue(_ set: @escaping (inout Settings, Int?) -> Void) -> (inout Settings, String, SettingSource) throws -> Void {
            { settings, text, source in
                if text.lowercased() == "none" { set(&settings, nil); return }
                set(&settings, try parseCount(text, minimum: 1, source: source))
            }
        }
        func showBudget(_ value: Int?) -> String { value.map(String.init) ?? "none" }
        return [
            Entry(flag: "square-size", key: "square.size", given: squareSize, apply: count(1) { $0.square.size = $1 }, show: { "\($0.square.size)" }),
            Entry(flag: "crop", key: "square.crop", given: crop, apply: { settings, text, source in
                let word = text.lowercased() == "center" ? "centre" : text.lowercased()
                guard let mode = CropMode(rawValue: word) else {
                    throw SnapError(.config, "\(source) must be centre (or center) or attention (got '\(text)')")
                }
                settings.square.crop = mode
            }, show: { $0.square.crop.rawValue }),
            Entry(flag: "faces", key: "square.faces", given: faces, apply: { settings, text, source in
                do { settings.square.faces = try parseSwitch(text, source: source) } catch {
                    throw SnapError(.config, "\(source) must be on or off (got '\(text)')")
                }
            }, show: { "\($0.square.faces)" }),
            Entry(flag: "budget", key: "square.budget", given: budget, apply: budgetValue { $0.square.budget = $1 }, show: { showBudget($0.square.budget) }),
            Entry(flag: "budget-mode", key: "budgetMode", given: budgetMode, apply: { settings, text, source in
                guard let mode = Settings.BudgetMode(rawValue: text.lowercased()) else {
                    throw SnapError(.config, "\(source) must be bytes or inline (got '\(text)')")
                }
                settings.budgetMode = mode
            }, show: { $0.budgetMode.rawValue }),
            Entry(flag: "payload-limit", key: "payloadLimit", given: payloadLimit, apply: count(1) { $0.payloadLimit = $1 }, show: { "\($0.payloadLimit)" }),
            Entry(flag: "payload-reserve", key: "payloadReserve", given: payloadReserve, apply: count(0) { $0.payloadReserve = $1 }, show: { "\($0.payloadReserve)" }),
            Entry(flag: "on-conflict", key: "onConflict", given: onConflict, apply: { settings, text, source in
                guard let policy = ConflictPolicy(rawValue: text.lowercased()) else {
                    throw SnapError(.config, "\(source) must be refuse or replace (got '\(text)')")
                }
                settings.onConflict = policy
            }, show: { $0.onConflict.rawValue }),
            Entry(flag: "quality-min", key: "square.qualityMin", given: qualityMin, apply: count(1) { $0.square.qualityMin = $1 }, show: { "\($0.square.qualityMin)" }),
            Entry(flag: "quality-max", key: "square.qualityMax", given: qualityMax, apply: count(1) { $0.square.qualityMax = $1 }, show: { "\($0.square.qualityMax)" }),
            Entry(flag: "chroma", key: "square.chroma", given: chroma, apply: { settings, text, source in
                guard let value = JPEG.Chroma(rawValue: text) else {
                    throw SnapError(.config, "\(source) must be 444 or 420 (got '\(text)')")
                }
                settings.square.chroma = value
            }, show: { $0.square.chroma.rawValue }),
            Entry(flag: "modern", key: "square.modern", given: modern, apply: { settings, text, source in
                settings.square.modern = try Settings.SquareSettings.parseModern(text, source: "\(source)")
            }, show: { $0.square.modern?.rawValue ?? "none" }),
            Entry(flag: "modern-effort", key: "square.modernEffort", given: modernEffort, apply: count(0) { $0.square.modernEffort = $1 },
                  show: { "\($0.square.modernEffort)" }),
            Entry(flag: "pixel-style", key: "pixel.style", given: pixelStyle, apply: { settings, text, source in
                settings.pixel.style = try Settings.PixelStyle.parse(text, source: "\(source)")
            }, show: { $0.pixel.style.rawValue }),
            Entry(flag: "grid", key: "pixel.grid", given: grid, apply: count(1) { $0.pixel.grid = $1 }, show: { "\($0.pixel.grid)" }),
            Entry(flag: "colours", key: "pixel.colours", given: colours, apply: count(1) { $0.pixel.colours = $1 }, show: { "\($0.pixel.colours)" }),
            Entry(flag: "palette", key: "pixel.palette", given: palette, apply: { settings, text, source in
                do { settings.pixel.palette = try PaletteChoice(parsing: text) } catch let error as SnapError {
                    throw SnapError(.config, "\(source): \(error.message)")
                }
            }, show: { $0.pixel.palette.description }),
            Entry(flag: "dither", key: "pixel.dither", given: dither.map { $0 ? "true" : "false" }, apply: { settings, text, source in
                settings.pixel.dither = try parseSwitch(text, source: source)
            }, show: { "\($0.pixel.dither)" }),
            Entry(flag: "pixel-scale", key: "pixel.scale", given: pixelScale, apply: count(1) { $0.pixel.scale = $1 }, show: { "\($0.pixel.scale)" }),
            Entry(flag: "pixel-budget", key: "pixel.budget", given: pixelBudget, apply: budgetValue { $0.pixel.budget = $1 }, show: { showBudget($0.pixel.budget) }),
            Entry(flag: "grid-budget", key: "pixel.gridBudget", given: gridBudget, apply: budgetValue { $0.pixel.gridBudget = $1 }, show: { showBudget($0.pixel.gridBudget) }),
            Entry(flag: "background", key: "background", given: background, apply: { settings, text, source in
                guard let colour = Colour(hex: text) else {
                    throw SnapError(.config, "\(source) must be a colour written #RRGGBB, e.g. #0A0A1A (got '\(text)')")
                }
                settings.background = colour
            }, show: { $0.background.description }),
            Entry(flag: "max-bytes", key: "limits.maxInputBytes", given: maxBytes, apply: count(1) { $0.limits.maxInputBytes = $1 }, show: { "\($0.limits.maxInputBytes)" }),
            Entry(flag: "max-pixels", key: "limits.maxPixels", given: maxPixels, apply: count(1) { $0.limits.maxPixels = $1 }, show: { "\($0.limits.maxPixels)" }),
            Entry(flag: "max-pixels-full-decode", key: "limits.maxPixelsFullDecode", given: maxPixelsFullDecode,
                  apply: count(1) { $0.limits.maxPixelsFullDecode = $1 }, show: { "\($0.limits.maxPixelsFullDecode)" }),
            Entry(flag: "fail-on", key: "failOn", given: failOn, apply: { settings, text, source in
                guard let level = Settings.FailOn(rawValue: text.lowercased()) else {
                    throw SnapError(.config, "\(source) must be one of truncated, error, warning (got '\(text)')")
                }
                settings.failOn = level
            }, show: { $0.failOn.rawValue }),
        ]
    }

    /// The config layers: these flags, the environment, and the config file.
    func layers(environment: [String: String] = ProcessEnvironment.values) throws -> ConfigLayers {
        do {
            let file = try ConfigLayers.loadFile(flag: config, environment: environment)
            var flags: [String: String] = [:]
            for entry in entries { if let given = entry.given { flags[entry.flag] = given } }
            return ConfigLayers(flags: flags, environment: environment, file: file)
        } catch let error as SnapError { throw ValidationError(error.message) }
    }

    /// The validated settings and where each came from, or a `ValidationError` that says what is
    /// wrong, where it was set, and what is allowed.
    func resolve(_ layers: ConfigLayers) throws -> (Settings, [(name: String, value: String, source: SettingSource)]) {
        var settings = layers.file?.pipeline ?? Settings()
        var report: [(String, SettingSource)] = []
        do {
            for entry in entries {
                if let (text, source) = layers.lookup(entry.flag) {
                    try entry.apply(&settings, text, source)
                    report.append((entry.key, source))
                } else if let file = layers.file, file.pipelineKeys.contains(entry.key) {
                    report.append((entry.key, .file(path: file.path, key: "pipeline.\(entry.key)")))
                } else {
                    report.append((entry.key, .defaultValue))
                }
            }
            try settings.validate()
        } catch let error as SnapError { throw ValidationError(culprit(of: error, layers) ?? error.message) }
        let shown = zip(entries, report).map { entry, item in (name: "pipeline.\(item.0)", value: entry.show(settings), source: item.1) }
        return (settings, shown)
    }

    /// The message of a failed validation prefixed by where the bad value came from
    /// (`--colours: pixel colours must be 2–256 (got 1)`), when one setting alone fails it.
    func culprit(of error: SnapError, _ layers: ConfigLayers) -> String? {
        for entry in entries {
            guard let (text, source) = layers.lookup(entry.flag) else { continue }
            var alone = Settings()
            guard (try? entry.apply(&alone, text, source)) != nil else { continue }
            do { try alone.validate() } catch let other as SnapError where other.message == error.message {
                return "\(source): \(error.message)"
            } catch {}
        }
        if let file = layers.file {
            do { try file.pipeline.validate() } catch let other as SnapError where other.message == error.message {
                return "config file \(file.path): \(error.message)"
            } catch {}
        }
        return nil
    }

    /// The validated settings.
    func settings() throws -> Settings { try resolve(try layers()).0 }

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

/// `--store`/`-s`, `SNAPTHUMB_STORE`, or `store.path` in the config file (`watch.store` too, as before).
enum StoreOption {
    static func lookup(_ flag: String?, _ layers: ConfigLayers) -> (text: String, source: SettingSource)? {
        var layers = layers
        if let flag { layers.flags["store"] = flag }
        return layers.lookup("store", file: [("store", "path"), ("watch", "store")])
    }

    static func resolve(_ flag: String?, _ layers: ConfigLayers) throws -> String {
        guard let (path, _) = lookup(flag, layers), !path.isEmpty else {
            throw ValidationError("no store given: pass --store <dir> (-s), set SNAPTHUMB_STORE, or set store.path in the config file")
        }
        return path
    }
}
