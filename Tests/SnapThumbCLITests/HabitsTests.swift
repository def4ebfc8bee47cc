@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import snapthumb

/// Issue 28's small habits: mistakes are named where they are, with the nearest right spelling.
@Suite("Habits", .serialized)
struct HabitsTests {
    @Test("an unknown SNAPTHUMB_* variable is warned about once, with the nearest known name; known ones are not")
    func unknownEnvironment() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let result = try CLI.run(["process", Fixtures.sample("snaps/tiny.png"), "--store", store],
                                 environment: ["SNAPTHUMB_BUGDET": "3000", "SNAPTHUMB_XYZZY_PLUGH": "1", "SNAPTHUMB_PALETTE": "pico8",
                                               "SNAPTHUMB_DRAIN_TIMEOUT": "3s", "SNAPTHUMB_S3_PROVIDER": "s3"])
        #expect(result.status == 0, "\(result.stderr)")
        let warnings = result.stderr.split(separator: "\n").filter { $0.hasPrefix("warning: SNAPTHUMB_") }
        #expect(warnings == ["warning: SNAPTHUMB_BUGDET is not a SnapThumb setting and is ignored (did you mean SNAPTHUMB_BUDGET?)",
                             "warning: SNAPTHUMB_XYZZY_PLUGH is not a SnapThumb setting and is ignored"], "\(result.stderr)")
        let json = try CLI.run(["config", "--log-format", "json"], environment: ["SNAPTHUMB_JOSB": "2"])
        #expect(json.stderr.contains("did you mean SNAPTHUMB_JOBS?"), "\(json.stderr)")
    }

    @Test("every name on the fast path is one a subcommand reads (derived from their help)")
    func commonNamesAreReal() {
        #expect(Suggestions.common.subtracting(Suggestions.environmentNames).isEmpty)
    }

    @Test("a mistyped subcommand gets a suggestion; a word far from any does not")
    func subcommandSuggestion() throws {
        for (word, suggestion) in [("proces", "process"), ("bakfill", "backfill"), ("lss", "ls"), ("verfy", "verify")] {
            let result = try CLI.run([word, "x"])
            #expect(result.status == 2)
            #expect(result.stderr.hasSuffix("Did you mean 'snapthumb \(suggestion)'?\n"), "\(word): \(result.stderr)")
        }
        let far = try CLI.run(["frobnicate"])
        #expect(far.status == 2 && !far.stderr.contains("Did you mean"), "\(far.stderr)")
    }

    @Test("a value out of range names the flag, variable or file it came from")
    func rangeNamesItsSource() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let flag = try CLI.run(["process", "x.jpg", "--store", store, "--colours", "1"])
        #expect(flag.status == 2 && flag.stderr.hasPrefix("Error: --colours: pixel colours must be 2–256 (got 1)"), "\(flag.stderr)")
        let env = try CLI.run(["process", "x.jpg", "--store", store], environment: ["SNAPTHUMB_COLOURS": "300"])
        #expect(env.status == 2 && env.stderr.hasPrefix("Error: SNAPTHUMB_COLOURS: pixel colours must be 2–256"), "\(env.stderr)")
    }

    @Test("a config file's unknown key is named with its line and column, in every section")
    func unknownKeyPlace() throws {
        let directory = Fixtures.tempDirectory()
        defer { Fixtures.remove(directory) }
        let cases: [(String, String)] = [
            ("{\n  \"pipeline\": {\n    \"square\": {\"budgte\": 3}\n  }\n}\n", ":3:16: unknown setting pipeline.square.budgte"),
            ("{\n  \"pipeline\": {\"colour\": 3}\n}\n", ":2:16: unknown setting pipeline.colour"),
            ("{\n  \"backfill\": {\n     \"jobz\": 1}\n}\n", ":3:6: unknown setting backfill.jobz"),
            ("{\"watch\": {\"drainTimeot\": \"3s\"}}", ":1:12: unknown setting watch.drainTimeot"),
            ("{\n\n   \"pipline\": {}}", ":3:4: unknown section \"pipline\""),
        ]
        for (i, (text, expected)) in cases.enumerated() {
            let path = "\(directory)/c\(i).json"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let result = try CLI.run(["config", "--config", path])
            #expect(result.status == 2)
            #expect(result.stderr.contains("config file \(path)\(expected)"), "\(result.stderr)")
        }
    }
}
