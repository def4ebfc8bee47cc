#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
import SnapThumbRunner
import SnapThumbVerify
import VipsKit

/// Issue 13: key conflicts, interrupted runs, stray temp files, strict configs.
@Suite("Safe to run unattended", .serialized)
struct SafetyTests {
    static func copy(_ sample: String, to path: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: Fixtures.sample(sample), toPath: path)
    }

    static func digest(_ path: String) throws -> String { "sha256:" + SHA256.hex(try Fixtures.bytes(path)) }


    @Test func theETAOfAResumedBackfillCountsOnlyTheWorkThatRemains() {
        // 90 files skipped at once, 10 processed in 10 s: 1 file/s, 100 files to go.
        let p = BackfillProgress(done: 100, total: 200, failed: 0, skipped: 90, seconds: 10)
        #expect(p.rate == 1)
        #expect(p.eta == 100)
        #expect(BackfillProgress(done: 50, total: 200, failed: 0, skipped: 50, seconds: 1).eta == nil, "no rate yet: no ETA")
    }

    @Test func theStorePublishesCreateOnlyAndRefusesOtherBytesUnderAKey() throws {
        let root = Fixtures.tempDirectory()
        defer { Fixtures.remove(root) }
        let a = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "k.jpg")
        let b = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/tiny.png"), key: "k.jpg")
        let store = try Store(root: root)
        #expect(try store.commit(a) == .created)
        let published = try Fixtures.bytes("\(root)/manifests/k.jpg.json")
        #expect(try store.commit(a) == .repeated)
        #expect { try store.commit(b) } throws: { ($0 as? SnapError)?.code == .conflict }
        #expect(store.commitBatch([b]).first??.code == .conflict, "the group commit decides the same way")
        #expect(try Fixtures.bytes("\(root)/manifests/k.jpg.json") == published)
        #expect(try StoreVerifier.verify(root: root).isClean)
        // A changed recipe for the same bytes re-derives; it is no conflict.
        let recoloured = try Fixtures.pipeline { $0.pixel.colours = 8 }.process(file: Fixtures.sample("snaps/grey.jpg"), key: "k.jpg")
        #expect(try store.commit(recoloured) == .rederived)
        #expect(try store.commit(recoloured) == .repeated, "the same recipe again is a repeat")
        #expect(try store.manifest(for: "k.jpg")?.recipe.digest == recoloured.manifest.recipe.digest)
        // Replace: the new bytes, and the old digest for the log.
        #expect(try Store(root: root, onConflict: .replace).commit(b) == .replaced(previous: a.manifest.source.digest))
        #expect(try store.manifest(for: "k.jpg")?.source.digest == b.manifest.source.digest)
    }

    @Test func twoWorkersRacingOnOneKeyPublishExactlyOnceAndTheOtherGetsAConflict() throws {
        let a = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/grey.jpg"), key: "race.jpg")
        let b = try Fixtures.pipeline().process(file: Fixtures.sample("snaps/tiny.png"), key: "race.jpg")
        final class Outcomes: @unchecked Sendable {
            let lock = NSLock()
            var won: [String] = [], refused = 0
        }
        for _ in 0..<20 {
            let root = Fixtures.tempDirectory()
            defer { Fixtures.remove(root) }
            let store = try Store(root: root)
            let outcomes = Outcomes()
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                let upload = i == 0 ? a : b
                do {
                    _ = try store.commit(upload)
                    outcomes.lock.withLock { outcomes.won.append(upload.manifest.source.digest) }
                } catch let error as SnapError where error.code == .conflict {
                    outcomes.lock.withLock { outcomes.refused += 1 }
                } catch {
                    Issue.record("unexpected \(error)")
                }
            }
            #expect(outcomes.won.count == 1 && outcomes.refused == 1)
            #expect(try store.manifest(for: "race.jpg")?.source.digest == outcomes.won.first)
        }
    }

    @Test func processReportsARepeatRefusesAConflictAndReplacesOnlyWhenAsked() throws {
        let dir = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir); Fixtures.remove(store) }
        let file = "\(dir)/msg-1.jpg"
        try Self.copy("snaps/grey.jpg", to: file)
        #expect(try CLI.run(["process", file, "--store", store]).status == 0)
        let manifest = "\(store)/manifests/msg-1.jpg.json"
        let published = try Fixtures.bytes(manifest)
        let first = try Self.digest(file)

        let again = try CLI.run(["process", file, "--store", store])
        #expect(again.status == 0)
        #expect(again.stderr.contains("repeat"))

        try Self.copy("snaps/phone-portrait.jpg", to: file)
        let second = try Self.digest(file)
        let refused = try CLI.run(["process", file, "--store", store])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("\(file): conflict: ") && refused.stderr.contains(first) && refused.stderr.contains(second))
        #expect(try Fixtures.bytes(manifest) == published, "the first manifest stays")
        #expect(try StoreVerifier.verify(root: store).isClean)

        let replaced = try CLI.run(["process", file, "--store", store, "--on-conflict", "replace"])
        #expect(replaced.status == 0)
        #expect(replaced.stderr.contains(first) && replaced.stderr.contains(second))
        #expect(try Store(root: store).manifest(for: "msg-1.jpg")?.source.digest == second)
        let bad = try CLI.run(["process", file, "--store", store], environment: ["SNAPTHUMB_ON_CONFLICT": "overwrite"])
        #expect(bad.status == 2 && bad.stderr.contains("SNAPTHUMB_ON_CONFLICT"))
    }

    @Test func backfillFailsAConflictInItsReportAndRederivesAChangedRecipe() throws {
        let input = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        try Self.copy("snaps/grey.jpg", to: "\(input)/a.jpg")
        try Self.copy("snaps/tiny.png", to: "\(input)/b.png")
        #expect(try CLI.run(["backfill", input, "--store", store, "--jobs", "1"]).status == 0)
        let published = try Fixtures.bytes("\(store)/manifests/a.jpg.json")

        try Self.copy("snaps/phone-portrait.jpg", to: "\(input)/a.jpg")
        let report = "\(input)/../report-\(UUID().uuidString).json"
        defer { Fixtures.remove(report) }
        let refused = try CLI.run(["backfill", input, "--store", store, "--jobs", "1", "--report", report])
        #expect(refused.status == 1)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
        #expect((doc["failedByCode"] as? [String: Int]) == ["conflict": 1])
        #expect(try Fixtures.bytes("\(store)/manifests/a.jpg.json") == published)

        // Same bytes, other recipe: both re-derived, no conflict.
        try Self.copy("snaps/grey.jpg", to: "\(input)/a.jpg")
        let recoloured = try CLI.run(["backfill", input, "--store", store, "--jobs", "1", "--colours", "8"])
        #expect(recoloured.status == 0, "\(recoloured.stderr)")
        #expect(recoloured.stderr.contains("2 processed"))
    }

    @Test("SIGINT/SIGTERM: finish in flight, summary and report marked interrupted, exit 128+signal, re-run completes",
          arguments: [(SIGINT, "processes"), (SIGTERM, "threads")])
    func interrupted(signal: Int32, isolation: String) throws {
        let input = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let sources = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files
        for i in 0..<60 {
            let source = sources[i % sources.count]
            try FileManager.default.copyItem(atPath: source.path, toPath: "\(input)/\(i)-\(source.relativePath)")
        }
        let report = "\(store)-report.json"
        defer { Fixtures.remove(report) }
        let process = try SpawnedProcess(CLI.binary, ["backfill", input, "--store", store, "--jobs", "2", "--isolation", isolation, "--report", report],
                                         stdout: .null, stderr: .pipe)
        let err = process.errors!
        // Interrupt once work is under way.
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline, ((try? FileWalker.regularFiles(under: "\(store)/manifests").files.count) ?? 0) == 0 {
            usleep(20_000)
        }
        process.signal(signal)
        let stderr = String(decoding: err.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 128 + signal, "\(stderr)")
        #expect(stderr.contains("interrupted: backfill: 60 files"))
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any])
        #expect(doc["interrupted"] as? Bool == true)
        let notStarted = try #require(doc["notStarted"] as? Int)
        #expect(notStarted > 0 && (doc["processed"] as? Int ?? 0) + notStarted + (doc["failed"] as? Int ?? 0) == 60)
        let verified = try StoreVerifier.verify(root: store)
        #expect(verified.isClean && verified.warnings.isEmpty, "no temp files are left: \(verified.warnings)")

        let rerun = try CLI.run(["backfill", input, "--store", store, "--jobs", "2"])
        #expect(rerun.status == 0)
        #expect(try StoreVerifier.verify(root: store).manifests == 60)
    }

    @Test func verifyWarnsAboutStrayTempFilesAndBackfillClearsStaleOnesAtStart() throws {
        let input = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        try Self.copy("snaps/grey.jpg", to: "\(input)/a.jpg")
        #expect(try CLI.run(["backfill", input, "--store", store]).status == 0)
        let stray = "\(store)/manifests/.tmp-\(try Fixtures.deadPID())-4-a.jpg.json"
        let decoy = "\(store)/manifests/.tmp-editor-swap"
        FileManager.default.createFile(atPath: stray, contents: Data("{\"sche".utf8))
        FileManager.default.createFile(atPath: decoy, contents: Data())
        let verify = try CLI.run(["verify", store])
        #expect(verify.status == 0, "a warning, not a problem")
        #expect(verify.stderr.contains("warning: \(stray): stray temp file"))
        #expect(!verify.stderr.contains(decoy))

        #expect(try CLI.run(["backfill", input, "--store", store]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: stray))
        #expect(FileManager.default.fileExists(atPath: decoy), "not a SnapThumb temp name")
    }

    @Test func operatorMistakesAreUsageErrorsBeforeAnyWork() throws {
        let dir = Fixtures.tempDirectory(), store = Fixtures.tempDirectory()
        defer { Fixtures.remove(dir); Fixtures.remove(store) }
        let missing = try CLI.run(["backfill", "\(dir)/no-such-dir", "--store", store])
        #expect(missing.status == 2 && missing.stderr.contains("no-such-dir"))

        let cases: [(String, String)] = [
            ("{\n  \"square\": { \"budget\": 3000, },\n  \"pixel\": {}\n}\n", "config.json:2:"),
            ("{\n  \"square\": { \"budget\": 3000 },\n  \"square\": { \"size\": 64 }\n}\n", "duplicate key square"),
            ("{ \"square\": { \"budget\": 3000, \"budget\": 2000 } }", "duplicate key square.budget"),
            ("{ \"pixel\": [1, 2,] }", "trailing comma"),
            ("{ \"square\": { \"budjet\": 3000 } }", "config.json:1:15: unknown setting square.budjet"),
        ]
        for (text, expected) in cases {
            try Data(text.utf8).write(to: URL(fileURLWithPath: "\(dir)/config.json"))
            for command in [["process", Fixtures.sample("snaps/grey.jpg")], ["backfill", dir], ["watch", dir]] {
                let result = try CLI.run(command + ["--store", store, "--config", "\(dir)/config.json"])
                #expect(result.status == 2, "\(command[0]) with \(text)")
                #expect(result.stderr.contains(expected), "\(command[0]): \(result.stderr)")
            }
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: "\(store)/manifests")) ?? []).isEmpty, "no work was done")
        // A config with a "watch" object is still a valid pipeline config.
        try Data("{ \"square\": { \"budget\": 3000 }, \"watch\": { \"jobs\": 1 } }".utf8).write(to: URL(fileURLWithPath: "\(dir)/config.json"))
        #expect(try CLI.run(["process", Fixtures.sample("snaps/grey.jpg"), "--store", store, "--config", "\(dir)/config.json"]).status == 0)
    }
}
