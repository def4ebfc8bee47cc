@testable import SnapThumbStore
@testable import snapthumb
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
@testable import SnapThumbCore
@_spi(Testing) import SnapThumbTesting
@testable import SnapThumbVerify
@_spi(Testing) @testable import SnapThumbRunner
import VipsKit

@Suite("Command line", .serialized)
struct CommandLineTests {
    @Test("process: a JSON line per manifest, '<file>: <code>: <message>' per failure, exit 1")
    func process() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let good = Fixtures.sample("snaps/phone-portrait.jpg"), bad = Fixtures.sample("bad/not-an-image.jpg")
        let result = try CLI.run(["process", good, bad, "--store", store])
        #expect(result.status == 1)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let manifest = try Manifest.decode(Data(lines[0].utf8))
        #expect(manifest.key == "phone-portrait.jpg")
        #expect(result.stderr.contains("\(bad): unsupported: "))
        #expect(FileManager.default.fileExists(atPath: "\(store)/manifests/phone-portrait.jpg.json"))
        #expect(!FileManager.default.fileExists(atPath: "\(store)/manifests/not-an-image.jpg.json"))

        let ok = try CLI.run(["process", good, "--store", store])
        #expect(ok.status == 0)
        #expect(ok.stdout == result.stdout, "same input, same manifest line")
    }

    @Test("usage errors exit 2 with a sentence that says what is allowed")
    func usage() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let cases: [([String], String)] = [
            (["process", "x.jpg", "--store", store, "--colours", "999"], "2–256"),
            (["process", "x.jpg", "--store", store, "--crop", "middle"], "centre (or center) or attention"),
            (["process", "x.jpg", "--store", store, "--background", "navy"], "#RRGGBB"),
            (["backfill", store, "--store", store, "--jobs", "0"], "at least 1"),
            (["process", "--store", store], "Missing expected argument"),
            (["frobnicate"], "Unexpected argument"),
        ]
        for (arguments, expected) in cases {
            let result = try CLI.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
        }
        let help = try CLI.run(["--help"])
        #expect(help.status == 0 && help.stdout.contains("backfill") && help.stdout.contains("Exit status"))
        // Every failure code a file can end with is listed (config is a usage error, exit 2).
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let codes = try #require(words.range(of: "Codes:")).upperBound
        for code in ErrorCode.allCases where code != .config {
            #expect(words[codes...].contains(" \(code.rawValue)"), "\(code.rawValue) is missing from snapthumb --help")
        }
        let processHelp = try CLI.run(["process", "--help"])
        #expect(processHelp.stdout.contains("--budget-mode") && processHelp.stdout.contains("[default: 4096]"))
    }

    @Test("backfill: keys are relative paths, inputs untouched, symlinks not followed, resumable, report")
    func backfill() throws {
        let input = Fixtures.tempDirectory("snapthumb-in"), store = Fixtures.tempDirectory("snapthumb-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let fm = FileManager.default
        try fm.createDirectory(atPath: "\(input)/2026/11", withIntermediateDirectories: true)
        try fm.copyItem(atPath: Fixtures.sample("snaps/phone-portrait.jpg"), toPath: "\(input)/2026/11/a.jpg")
        try fm.copyItem(atPath: Fixtures.sample("snaps/landscape.webp"), toPath: "\(input)/b.webp")
        try fm.copyItem(atPath: Fixtures.sample("bad/truncated.jpg"), toPath: "\(input)/broken.jpg")
        try fm.copyItem(atPath: Fixtures.sample("snaps/tiny.png"), toPath: "\(input)/.hidden.png")
        try fm.createSymbolicLink(atPath: "\(input)/link.jpg", withDestinationPath: "\(input)/2026/11/a.jpg")
        try fm.createSymbolicLink(atPath: "\(input)/linkdir", withDestinationPath: "\(input)/2026")
        let before = try FileWalker.regularFiles(under: input).files.map { ($0.relativePath, SHA256.hex(try Fixtures.bytes($0.path))) }

        let report = "\(store)/report.json"
        let first = try CLI.run(["backfill", input, "--store", "\(store)/s", "--jobs", "2", "--report", report])
        #expect(first.status == 1, "\(first.stderr)")
        #expect(first.stderr.contains("2 processed, 0 skipped"), "\(first.stderr)")
        #expect(first.stderr.contains("corrupt=1"))
        #expect(first.stderr.contains("broken.jpg: corrupt: "))
        #expect(fm.fileExists(atPath: "\(store)/s/manifests/2026/11/a.jpg.json"))
        #expect(fm.fileExists(atPath: "\(store)/s/manifests/b.webp.json"))
        #expect(!fm.fileExists(atPath: "\(store)/s/manifests/link.jpg.json"))
        #expect(!fm.fileExists(atPath: "\(store)/s/manifests/linkdir"))
        let doc = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as! [String: Any]
        #expect(doc["processed"] as? Int == 2)
        let failures = doc["failures"] as! [[String: Any]]
        #expect(failures.count == 1 && failures[0]["code"] as? String == "corrupt" && failures[0]["key"] as? String == "broken.jpg")

        let second = try CLI.run(["backfill", input, "--store", "\(store)/s"])
        #expect(second.stderr.contains("0 processed, 2 skipped"), "\(second.stderr)")

        let changed = try CLI.run(["backfill", input, "--store", "\(store)/s", "--budget", "3000"])
        #expect(changed.stderr.contains("2 processed, 0 skipped"), "a new recipe reprocesses: \(changed.stderr)")

        let after = try FileWalker.regularFiles(under: input).files.map { ($0.relativePath, SHA256.hex(try Fixtures.bytes($0.path))) }
        #expect(before.map(\.0) == after.map(\.0) && before.map(\.1) == after.map(\.1), "inputs changed")
        #expect(try CLI.run(["verify", "\(store)/s"]).status == 0)
    }

    /// Live processes whose command line mentions `text`.
    static func processes(mentioning text: String) -> Int {
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.filter { $0.allSatisfy(\.isNumber) } ?? []
        return pids.filter { pid in
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                  let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  !status.contains(") Z ") else { return false }
            return String(decoding: data.map { $0 == 0 ? 32 : $0 }, as: UTF8.self).contains(text)
        }.count
    }

    @Test("kill -9 during a backfill never leaves a partial manifest or blob")
    func killDuringBackfill() throws {
        let input = Fixtures.tempDirectory("snapthumb-kill-in"), store = Fixtures.tempDirectory("snapthumb-kill-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        let sources = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files
        for i in 0..<60 {
            let source = sources[i % sources.count]
            try FileManager.default.copyItem(atPath: source.path, toPath: "\(input)/\(i)-\(source.relativePath)")
        }
        // The store exists from the start, so that a kill before the backfill
        // gets that far still leaves a store to verify.
        _ = try Store(root: store)
        for delay in [0.15, 0.3, 0.45, 0.6] {
            let process = try SpawnedProcess(CLI.binary, ["backfill", input, "--store", store, "--jobs", "2"], stdout: .null, stderr: .null)
            Thread.sleep(forTimeInterval: delay)
            process.signal(SIGKILL)
            process.wait()
            // Its worker processes die with it (PR_SET_PDEATHSIG); wait until they have.
            let deadline = Date().addingTimeInterval(20)
            while Self.processes(mentioning: store) > 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            #expect(Self.processes(mentioning: store) == 0, "workers outlived their backfill")
            let report = try StoreVerifier.verify(root: store)
            #expect(report.isClean, "after kill at \(delay)s: \(report.problems)")
        }
        // And a final run completes the job.
        let finish = try CLI.run(["backfill", input, "--store", store])
        #expect(finish.stderr.contains("60 files"))
        #expect(try StoreVerifier.verify(root: store).manifests == 60)
    }

    @Test("a worker process that crashes costs only the file that crashes it", arguments: ["processes", "threads"])
    func isolation(mode: String) throws {
        let input = Fixtures.tempDirectory("snapthumb-iso-in"), store = Fixtures.tempDirectory("snapthumb-iso-store")
        defer { Fixtures.remove(input); Fixtures.remove(store) }
        for i in 0..<24 {
            try FileManager.default.copyItem(atPath: Fixtures.sample("snaps/tiny.png"), toPath: "\(input)/\(i).png")
        }
        try FileManager.default.copyItem(atPath: Fixtures.sample("snaps/grey.jpg"), toPath: "\(input)/killer.jpg")
        if mode == "threads" {
            // Same files, no fault: both modes give the same store.
            let result = try CLI.run(["backfill", input, "--store", store, "--jobs", "2", "--isolation", mode])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stderr.contains("25 processed"))
            return
        }
        // Worker processes of the real binary, driven in-process so that the test can
        // inject its fault plan: the worker handed killer.jpg is SIGKILLed, every time.
        var backfill = Backfill(pipeline: try Pipeline(), store: try Store(root: store), jobs: 2,
                                isolation: .processes(executable: CLI.binary))
        backfill.faults = KillWorker(onKeysEndingWith: "killer.jpg")
        let summary = try backfill.run(root: input)
        // Files the crashed worker had already made durable are skipped on the retry
        // (how many depends on timing and the window of files sent ahead): all 24 are done.
        #expect(summary.processed + summary.skipped == 24, "\(summary)")
        #expect(summary.failures.map(\.key) == ["killer.jpg"], "\(summary.failures)")
        #expect(summary.failures.first?.code == .poison)
        let report = try StoreVerifier.verify(root: store)
        #expect(report.isClean && report.manifests == 24, "\(report)")
    }
}

@Suite("libvips is opened on first need")
struct LazyLibvipsTests {
    /// Whether a running process has libvips mapped. (Read to the end: procfs files
    /// report no size, and String(contentsOfFile:) stops after the first 4 KB.)
    static func mapsLibvips(_ pid: Int32) throws -> Bool { try maps("/libvips.so", pid) }

    static func maps(_ library: String, _ pid: Int32) throws -> Bool {
        guard let maps = FileHandle(forReadingAtPath: "/proc/\(pid)/maps") else { throw SnapError(.io, "no /proc/\(pid)/maps") }
        defer { try? maps.close() }
        return String(decoding: maps.readDataToEndOfFile(), as: UTF8.self).contains(library)
    }

    @Test("a worker maps libvips only once an image needs it: not for a plain JPEG, yes for a PNG")
    func workerOpensLibvipsOnFirstNeed() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let process = try SpawnedProcess(CLI.binary, ["worker", "--store", store, "--settings-json", "{}"], stdin: .pipe, stdout: .pipe)
        let input = process.input!, output = process.output!
        defer { if process.isRunning { process.terminate() }; process.waitUntilExit() }
        var buffered = Data()
        /// Sends one job and reads replies until its final one.
        func run(_ index: Int, _ path: String, key: String) throws -> String {
            let size = try Fixtures.bytes(path).count
            let job = "{\"i\":\(index),\"path\":\"\(path)\",\"key\":\"\(key)\",\"size\":\(size)}\n"
            input.write(Data(job.utf8))
            while true {
                while let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffered[..<newline], as: UTF8.self)
                    buffered = Data(buffered[(newline + 1)...])
                    if !line.contains("\"staged\"") { return line }
                }
                let more = output.availableData
                if more.isEmpty { return "worker exited" }
                buffered.append(more)
            }
        }
        let jpeg = try run(0, Fixtures.sample("snaps/phone-portrait.jpg"), key: "a.jpg")
        #expect(jpeg.contains("\"processed\""), "\(jpeg)")
        #expect(try !Self.mapsLibvips(process.processIdentifier))
        // A local store sends no request: libcurl (and its TLS, HTTP/2, LDAP... libraries) stays unloaded.
        #expect(try !Self.maps("/libcurl.so", process.processIdentifier))
        let png = try run(1, Fixtures.sample("snaps/alpha.png"), key: "b.png")
        #expect(png.contains("\"processed\""), "\(png)")
        #expect(try Self.mapsLibvips(process.processIdentifier))
        try input.close()
    }
}

@Suite("Worker start")
struct WorkerStartTests {
    @Test("a worker reads the command line the runner writes without ArgumentParser, and nothing else")
    func fastPathTakesTheRunnersCommandLine() throws {
        let store = Fixtures.tempDirectory()
        defer { Fixtures.remove(store) }
        let backend = try Store(root: store)
        let written = try WorkerCommandLine.arguments(settings: Settings(), store: backend, reader: nil, jobs: 2, isolated: true)
        #expect(written.first == "worker")
        let start = try #require(WorkerStart(arguments: written.dropFirst()))
        #expect(start.store == backend.workerArgument)
        #expect(start.isolated)
        #expect(start.commitDelayMs == defaultGroupCommitDelay * 1000 * 2)
        let settings = try JSONDecoder().decode(Settings.self, from: Data(start.settingsJSON.utf8))
        #expect(settings == Settings())
        // Help, a missing value, an unknown option or no store: ArgumentParser's usual answer instead.
        #expect(WorkerStart(arguments: ["--help"]) == nil)
        #expect(WorkerStart(arguments: ["--store", store, "--settings-json"]) == nil)
        #expect(WorkerStart(arguments: ["--store", store, "--settings-json", "{}", "--bogus", "1"]) == nil)
        #expect(WorkerStart(arguments: ["--settings-json", "{}"]) == nil)
        #expect(WorkerStart(arguments: ["--store", store, "--settings-json", "{}", "--commit-delay-ms", "soon"]) == nil)
    }
}
