@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import snapthumb

/// One configuration for every subcommand: a file with sections, SNAPTHUMB_* for every setting,
/// flags > environment > file > defaults, and `snapthumb config` saying where each value came from.
@Suite("Unified configuration", .serialized)
struct UnifiedConfigTests {
    private func write(_ json: String, in dir: String, name: String = "snapthumb.json") throws -> String {
        let path = dir + "/" + name
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func budget(_ result: CLI.Result) throws -> Int? {
        let manifest = try Manifest.decode(Data(result.stdout.split(separator: "\n")[0].utf8))
        return manifest.variants["square100"]?.budget
    }

    @Test("one file serves process, backfill and watch; precedence flag > env > file > default")
    func oneFileAllCommands() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let config = try write("""
        { "pipeline": { "square": { "budget": 3000, "crop": "center" } },
          "store": { "path": "\(dir)/store" },
          "watch": { "drainTimeout": "20s", "jobs": 1 },
          "backfill": { "jobs": 1, "progressInterval": "500ms" },
          "log": { "level": "warning" } }
        """, in: dir)
        let snap = Fixtures.sample("snaps/phone-portrait.jpg")
        let file = try CLI.run(["process", snap, "--config", config])
        #expect(file.status == 0, "\(file.stderr)")
        #expect(try budget(file) == 3000)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/store/manifests/phone-portrait.jpg.json"), "store.path from the file")
        let env = try CLI.run(["process", snap], environment: ["SNAPTHUMB_CONFIG": config, "SNAPTHUMB_BUDGET": "2500"])
        #expect(try budget(env) == 2500)
        let flag = try CLI.run(["process", snap, "--budget", "2000"], environment: ["SNAPTHUMB_CONFIG": config, "SNAPTHUMB_BUDGET": "2500"])
        #expect(try budget(flag) == 2000)
        let none = try CLI.run(["process", snap, "-s", "\(dir)/other"], environment: ["SNAPTHUMB_BUDGET": "none"])
        #expect(try budget(none) == nil)

        let backfill = try CLI.run(["backfill", Fixtures.sample("snaps"), "--config", config])
        #expect(backfill.status == 0, "\(backfill.stderr)")
        #expect(!backfill.stderr.contains("backfill:"), "log.level warning from the file hides the summary")

        let shown = try CLI.run(["config", "--config", config, "--json", "--quality-max", "80"],
                                environment: ["SNAPTHUMB_PALETTE": "pico8", "SNAPTHUMB_POLL_INTERVAL": "3s",
                                              "SNAPTHUMB_ON_CONFLICT": "replace", "SNAPTHUMB_CREATE": "true"])
        #expect(shown.status == 0, "\(shown.stderr)")
        // Values are typed as in the file (numbers, booleans, strings); issue 28.
        let object = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: [String: Any]])
        func row(_ name: String) -> String {
            guard let row = object[name], let data = try? JSONSerialization.data(withJSONObject: row, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "missing" }
            return String(decoding: data, as: UTF8.self)
        }
        func expected(_ value: String, _ source: String) -> String { #"{"source":"\#(source)","value":\#(value)}"# }
        #expect(row("pipeline.square.budget") == expected("3000", "pipeline.square.budget in \(config)"))
        #expect(row("pipeline.square.crop") == expected(#""centre""#, "pipeline.square.crop in \(config)"))
        #expect(row("pipeline.square.qualityMax") == expected("80", "--quality-max"))
        #expect(row("pipeline.pixel.palette") == expected(#""pico8""#, "SNAPTHUMB_PALETTE"))
        #expect(row("pipeline.pixel.colours") == expected("16", "default"))
        #expect(row("store.path") == expected("\"\(dir)/store\"", "store.path in \(config)"))
        #expect(row("backfill.progressInterval") == expected(#""500ms""#, "backfill.progressInterval in \(config)"))
        #expect(row("watch.drainTimeout") == expected(#""20s""#, "watch.drainTimeout in \(config)"))
        #expect(row("watch.pollInterval") == expected(#""3s""#, "SNAPTHUMB_POLL_INTERVAL"))
        #expect(object["watch.jobs"]?["value"] as? Int == 1)
        #expect(row("pipeline.onConflict") == expected(#""replace""#, "SNAPTHUMB_ON_CONFLICT"))
        #expect(row("pipeline.payloadLimit") == expected("4096", "default"))
        #expect(row("watch.create") == expected("true", "SNAPTHUMB_CREATE"))
        #expect(row("log.level") == expected(#""warning""#, "log.level in \(config)"))

        let text = try CLI.run(["config", "--config", config])
        #expect(text.stdout.contains("pipeline.square.budget"))
        #expect(text.stdout.contains("(pipeline.square.budget in \(config))"))
    }

    @Test("config files written before sections still work: top-level pipeline fields and watch.store")
    func legacyLayout() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let config = try write("""
        { "square": { "budget": 3100 }, "watch": { "store": "\(dir)/store", "jobs": 2 } }
        """, in: dir)
        let result = try CLI.run(["process", Fixtures.sample("snaps/phone-portrait.jpg"), "--config", config])
        #expect(result.status == 0, "the \"watch\" object no longer stops process: \(result.stderr)")
        #expect(try budget(result) == 3100)
        #expect(FileManager.default.fileExists(atPath: "\(dir)/store/manifests/phone-portrait.jpg.json"))
    }

    @Test("mistakes name where the value came from, in the user's words")
    func mistakes() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let snap = Fixtures.sample("snaps/phone-portrait.jpg")
        let cases: [([String], [String: String], String)] = [
            (["process", snap, "-s", dir, "--config", try write(#"{"pipline": {}}"#, in: dir, name: "a.json")], [:], "unknown section \"pipline\""),
            (["process", snap, "-s", dir, "--config", try write(#"{"backfill": {"jobz": 2}}"#, in: dir, name: "b.json")], [:], "unknown setting backfill.jobz"),
            (["process", snap, "-s", dir, "--config", try write(#"{"square": {"size": "big"}}"#, in: dir, name: "c.json")], [:], "pipeline.square.size must be a number"),
            (["process", snap, "-s", dir], ["SNAPTHUMB_COLOURS": "lots"], "SNAPTHUMB_COLOURS must be a whole number (got 'lots')"),
            (["backfill", dir, "-s", dir], ["SNAPTHUMB_PROGRESS_INTERVAL": "soon"], "SNAPTHUMB_PROGRESS_INTERVAL must be a positive duration such as 500ms, 10s"),
            (["backfill", dir, "-s", dir, "-j", "0"], [:], "--jobs cannot be zero: it must be at least 1 (got 0)"),
            (["backfill", dir, "-s", dir, "--jobs", "-2"], [:], "--jobs cannot be negative: it must be at least 1 (got -2)"),
            (["process", snap, "-s", dir, "--max-bytes", "-1"], [:], "--max-bytes cannot be negative"),
            (["process", snap, "-s", dir, "--crop", "middle"], [:], "--crop must be centre (or center) or attention (got 'middle')"),
            (["process", snap], [:], "no store given: pass --store <dir> (-s), set SNAPTHUMB_STORE, or set store.path in the config file"),
        ]
        for (arguments, environment, expected) in cases {
            let result = try CLI.run(arguments, environment: environment)
            #expect(result.status == 2, "\(arguments) \(environment)")
            #expect(result.stderr.contains(expected), "\(arguments) \(environment): \(result.stderr)")
            for typeName in ["Int", "Double", "String", "Optional", "DecodingError", "Swift."] {
                #expect(!result.stderr.contains("\(typeName)<") && !result.stderr.contains(" \(typeName) ") && !result.stderr.contains("\(typeName)."),
                        "no Swift type names: \(result.stderr)")
            }
        }
    }

    @Test("center is accepted as well as centre, and the recipe stays the same")
    func center() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let snap = Fixtures.sample("snaps/phone-portrait.jpg")
        let centre = try CLI.run(["process", snap, "-s", dir, "--crop", "centre"])
        let center = try CLI.run(["process", snap, "-s", dir, "--crop", "center"])
        #expect(center.status == 0)
        #expect(center.stdout == centre.stdout)
    }

    @Test("--faces on|off, SNAPTHUMB_FACES and pipeline.square.faces: flag > env > file > default (on); in the recipe; crop.source follows")
    func faces() throws {
        let dir = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir) }
        let config = try write(#"{ "pipeline": { "square": { "faces": false } } }"#, in: dir)
        let person = Fixtures.sample("people/side-person.jpg")
        func crop(_ result: CLI.Result) throws -> (String?, Bool?, String) {
            let manifest = try Manifest.decode(Data(result.stdout.split(separator: "\n")[0].utf8))
            return (manifest.crop?.source.rawValue, manifest.recipe.settings.square.faces, manifest.recipe.digest)
        }
        let byDefault = try crop(try CLI.run(["process", person, "-s", "\(dir)/a"]))
        #expect(byDefault.0 == "faces" && byDefault.1 == true)
        let file = try crop(try CLI.run(["process", person, "-s", "\(dir)/b", "--config", config]))
        #expect(file.0 == "centre" && file.1 == false)
        #expect(file.2 != byDefault.2, "the setting is part of the recipe digest")
        let env = try crop(try CLI.run(["process", person, "-s", "\(dir)/c", "--config", config], environment: ["SNAPTHUMB_FACES": "on"]))
        #expect(env.0 == "faces")
        let flag = try crop(try CLI.run(["process", person, "-s", "\(dir)/d", "--faces", "off"], environment: ["SNAPTHUMB_FACES": "on"]))
        #expect(flag.0 == "centre")
        let bad = try CLI.run(["process", person, "-s", "\(dir)/e", "--faces", "maybe"])
        #expect(bad.status != 0 && bad.stderr.contains("--faces must be on or off (got 'maybe')"), "\(bad.stderr)")
    }

    @Test("durations: one syntax, formatted back the same way")
    func durations() {
        #expect(parseDuration("500ms") == 0.5)
        #expect(parseDuration("10s") == 10 && parseDuration("5m") == 300 && parseDuration("2h") == 7200 && parseDuration("7d") == 604_800)
        #expect(parseDuration("1.5") == 1.5)
        #expect(parseDuration("soon") == nil && parseDuration("-1s") == nil)
        for text in ["500ms", "10s", "5m", "2h", "7d", "0s", "1.5s"] {
            #expect(formatDuration(parseDuration(text)!) == text)
        }
    }
}

@Suite("CLI habits", .serialized)
struct CLIHabitTests {
    @Test("shell completion scripts are generated for bash, zsh and fish")
    func completions() throws {
        for shell in ["bash", "zsh", "fish"] {
            let result = try CLI.run(["--generate-completion-script", shell])
            #expect(result.status == 0)
            #expect(result.stdout.contains("backfill") && result.stdout.contains("log-format"), "\(shell)")
        }
    }

    @Test("a refused setting prints its sentence and where to look, not the root usage line")
    func refusedSetting() throws {
        let result = try CLI.run(["backfill", Fixtures.sample("snaps"), "-s", "/tmp", "-j", "0"])
        #expect(result.status == 2)
        #expect(result.stderr == "Error: --jobs cannot be zero: it must be at least 1 (got 0)\nSee 'snapthumb backfill --help' for what is allowed.\n")
    }

    @Test("the progress bar never exceeds the terminal width")
    func progressWidth() {
        let stats = "1000/2000  50% 517.4 img/s ETA 0:02 failed 0"
        for columns in [10, 20, 40, 60, 80, 200] {
            let line = ProgressDisplay.barLine(stats: stats, done: 1000, total: 2000, columns: columns)
            #expect(line.count <= columns - 1, "\(columns): \(line)")
        }
        #expect(ProgressDisplay.barLine(stats: stats, done: 1000, total: 2000, columns: 200).hasPrefix("[###############...............] "))
        #expect(ProgressDisplay.barLine(stats: stats, done: 1000, total: 2000, columns: 40) == String(stats.prefix(39)))
        // Issue 28: a narrow terminal keeps a bar, with the compact statistics.
        let compact = "1000/2000 50% ETA 0:02"
        for columns in [10, 20, 30, 40, 60, 80, 200] {
            let line = ProgressDisplay.barLine(stats: stats, compact: compact, done: 1000, total: 2000, columns: columns)
            #expect(line.count <= columns - 1, "\(columns): \(line)")
        }
        #expect(ProgressDisplay.barLine(stats: stats, compact: compact, done: 1000, total: 2000, columns: 40) == "[#######.......] 1000/2000 50% ETA 0:02")
        #expect(ProgressDisplay.barLine(stats: stats, compact: compact, done: 1000, total: 2000, columns: 80).hasSuffix("] " + stats))
    }

    @Test("issue 28: summaries wrap at spaces to the terminal's width, continuations indented")
    func summaryWraps() {
        let text = "backfill: 600 files: 598 processed, 0 skipped (already done), 2 failed in 123.4 s (4.9 images/s)\nmanifests: ./store/manifests/"
        let wrapped = Console.wrapped(text, columns: 60)
        for line in wrapped.split(separator: "\n") { #expect(line.count <= 59, "\(line)") }
        #expect(wrapped.replacingOccurrences(of: "\n  ", with: " ") == text)
        #expect(Console.wrapped(text, columns: nil) == text, "not a terminal: unchanged")
    }
}
