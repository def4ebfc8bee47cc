@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import SnapThumbBench
@testable import SnapThumbRunner
import VipsKit

// Serialized: the confinement test changes the CPU set of this whole test process,
// and a bench started meanwhile would see one CPU.
@Suite("Bench", .serialized)
struct BenchTests {
    @Test("percentiles interpolate between the nearest ranks")
    func percentiles() {
        #expect(Statistics.percentile([], 50) == nil)
        #expect(Statistics.percentile([7], 99) == 7)
        #expect(Statistics.median([3, 1, 2]) == 2)
        #expect(Statistics.median([4, 1, 3, 2]) == 2.5, "even count: mean of the middle two")
        let hundredOne = (0...100).map(Double.init).shuffled()
        #expect(Statistics.percentile(hundredOne, 95) == 95)
        #expect(Statistics.percentile(hundredOne, 0) == 0)
        #expect(Statistics.percentile(hundredOne, 100) == 100)
        #expect(Statistics.percentile([10, 20], 99)! == 19.9)
        #expect(Statistics.percentile([10, 20], 150) == 20, "clamped to 0–100")
        #expect(Statistics.mean([1, 2, 6]) == 3)
    }

    @Test("budget accounting counts encodes, bytes and anything over budget")
    func variantStats() {
        func variant(bytes: Int, budget: Int?, encodes: Int) -> VariantBrief {
            VariantBrief(Variant(digest: "sha256:00", path: "p", mediaType: "image/jpeg", width: 100, height: 100, bytes: bytes, base64Length: nil,
                    budget: budget, budgetMode: .bytes, quality: 80, colours: nil, palette: nil, dither: nil,
                    encodes: encodes, degraded: false))
        }
        var stats = VariantStats()
        stats.add(variant(bytes: 4000, budget: 4096, encodes: 2))
        stats.add(variant(bytes: 5000, budget: 4096, encodes: 4))
        stats.add(variant(bytes: 9000, budget: nil, encodes: 1))
        #expect(stats.count == 3 && stats.encodesMax == 4 && stats.encodesMean == 7.0 / 3)
        #expect(stats.bytesMean == 6000 && stats.overBudget == 1)
    }

    @Test("bench --against takes each reference by name (floor, pillow, vipsthumbnail) and refuses others with the names")
    func againstNames() throws {
        let wrong = try CLI.run(["bench", Fixtures.sample("snaps"), "--against", "imagemagick"])
        #expect(wrong.status == 2 && wrong.stderr.contains("vipsthumbnail, floor, pillow"), "\(wrong.status) \(wrong.stderr)")
        for name in ["floor", "pillow", "vipsthumbnail"] {
            // Parsing only: --help after a valid value exits 0 without running anything.
            let accepted = try CLI.run(["bench", Fixtures.sample("snaps"), "--against", name, "--isolation", "sideways"])
            #expect(!accepted.stderr.contains("--against"), "\(name): \(accepted.stderr)")
        }
    }

    @Test("bench --json: the headline keys with sane values, and no temporary store left behind")
    func benchJSON() throws {
        let temp = Fixtures.tempDirectory("snapthumb-bench-test")
        defer { Fixtures.remove(temp) }
        let result = try CLI.run(["bench", Fixtures.sample("snaps"), "--jobs", "2", "--repeat", "1", "--json", "--temp-dir", temp])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let doc = try #require(object, "stdout is one JSON object: \(result.stdout)")
        func number(_ key: String) -> Double { (doc[key] as? NSNumber)?.doubleValue ?? -1 }
        #expect(number("images_per_second") > 0)
        #expect(number("vipsthumbnail_images_per_second") > 0)
        #expect(number("ratio") > 0)
        #expect(number("cpu_ms_per_image") > 0)
        #expect(number("p99_ms") > 0)
        #expect(number("peak_rss_bytes") > 0)
        #expect(number("encodes_mean") >= 1)
        #expect(number("over_budget") == 0)
        // Face detection as a stage of its own (issue 38): every sample SnapThumb reads, a cost above zero.
        let faces = try #require(doc["facesStage"] as? [String: Any], "no facesStage in \(doc.keys.sorted())")
        #expect((faces["cpuMsPerImage"] as? NSNumber)?.doubleValue ?? 0 > 0)
        #expect((faces["images"] as? Int ?? 0) >= 10)
        // The floor decodes the JPEG samples only; SnapThumb spends more CPU per image than it.
        let jpegs = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files.filter {
            (try? Fixtures.bytes($0.path).prefix(3)).map(Array.init) == [0xFF, 0xD8, 0xFF]
        }.count
        #expect(doc["floor_images"] as? Int == jpegs)
        #expect(number("floor_cpu_ms_per_image") > 0)
        #expect(number("floor_cpu_ratio") > 1)
        // The kernel's part of each side's CPU, apart (SnapThumb's is mostly its store's files): part
        // of the CPU figure, never more than it. The kernel splits a process's time by sampling at
        // its ticks, so on a run this short a side's part may be 0.
        #expect(number("sys_ms_per_image") >= 0 && number("sys_ms_per_image") < number("cpu_ms_per_image"))
        #expect(number("floor_sys_ms_per_image") >= 0 && number("floor_sys_ms_per_image") < number("floor_cpu_ms_per_image"))
        // One round: the user-only ratio is that round's user CPU per image over the floor's.
        let userRatio = (number("cpu_ms_per_image") - number("sys_ms_per_image"))
            / (number("floor_cpu_ms_per_image") - number("floor_sys_ms_per_image"))
        #expect(abs(number("floor_user_cpu_ratio") - userRatio) < 0.01 * userRatio + 0.002, "\(number("floor_user_cpu_ratio")) vs \(userRatio)")
        let rounds = try #require(doc["rounds"] as? [[String: Any]])
        for round in rounds {
            let cpu = (round["cpu_ms_per_image"] as? NSNumber)?.doubleValue ?? -1, sys = (round["sys_ms_per_image"] as? NSNumber)?.doubleValue ?? -1
            #expect(sys >= 0 && sys <= cpu, "\(round)")
        }
        #expect(number("vipsthumbnail_cpu_ratio") > 0)
        let images = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files.count
        #expect(doc["images"] as? Int == images)
        // Pillow (where it is installed) thumbnails the samples it can read (every JPEG; not HEIC)
        // in memory, and reports its count.
        if ReferenceTool.pillow.unavailableReason == nil {
            let made = doc["pillow_images"] as? Int ?? -1
            #expect(made >= jpegs && made <= images, "\(made) of \(images)")
            #expect(number("pillow_cpu_ms_per_image") > 0)
        }
        // The samples hold JPEG and HEIC: each was also measured alone (issue 41), HEIC against
        // vipsthumbnail only, JPEG against every reference.
        let heics = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files.filter { $0.path.hasSuffix(".heic") }.count
        let formats = try #require(doc["formats"] as? [String: [String: Any]], "no formats in \(doc.keys.sorted())")
        let heic = try #require(formats["heic"]), jpeg = try #require(formats["jpeg"])
        #expect(heic["files"] as? Int == heics && heic["images"] as? Int == heics && heic["vipsthumbnail_images"] as? Int == heics)
        #expect(((heic["vipsthumbnail_cpu_ratio"] as? NSNumber)?.doubleValue ?? 0) > 0)
        #expect(heic["floor_images"] == nil && heic["pillow_images"] == nil)
        #expect(jpeg["files"] as? Int == jpegs && jpeg["images"] as? Int == jpegs && jpeg["floor_images"] as? Int == jpegs)
        #expect(((jpeg["floor_cpu_ratio"] as? NSNumber)?.doubleValue ?? 0) > 1)
        #expect(result.stderr.contains("bench: round 1/1 snapthumb (HEIC only) jobs 2"))
        let left = try FileManager.default.contentsOfDirectory(atPath: temp)
        #expect(left.isEmpty, "left behind: \(left)")
        #expect(result.stderr.contains("bench: round 1/1 snapthumb jobs 2"))
    }

    @Test("bench's format groups: JPEG by its first bytes, HEIC by an HEVC brand in ftyp (AVIF is neither)")
    func formatGroups() throws {
        func ftyp(_ major: String, _ compatible: [String]) -> [UInt8] {
            let brands = [major, "\0\0\0\0"] + compatible
            let size = 8 + 4 * brands.count
            return [0, 0, 0, UInt8(size)] + Array("ftyp".utf8) + brands.flatMap { Array($0.utf8) } + [0, 0, 0, 8]
        }
        #expect(FormatGroup.of(head: [0xFF, 0xD8, 0xFF, 0xE0]) == .jpeg)
        #expect(FormatGroup.of(head: ftyp("heic", ["mif1", "heic"])) == .heic)
        #expect(FormatGroup.of(head: ftyp("mif1", ["mif1", "heix"])) == .heic, "a compatible brand is enough")
        #expect(FormatGroup.of(head: ftyp("avif", ["avif", "mif1"])) == nil)
        #expect(FormatGroup.of(head: Array("\u{89}PNG\r\n\u{1A}\n........".utf8)) == nil)
        for sample in ["snaps/iphone.heic", "snaps/heic-exif-orientation-6.heic"] {
            #expect(FormatGroup.of(Fixtures.sample(sample)) == .heic, "\(sample)")
        }
        #expect(FormatGroup.of(Fixtures.sample("snaps/small.avif")) == nil)
        #expect(FormatGroup.of(Fixtures.sample("snaps/grey.jpg")) == .jpeg)
        // Only a set of two formats or more is split.
        let files = try FileWalker.regularFiles(under: Fixtures.sample("snaps")).files
        #expect(FormatGroup.split(files).map(\.group) == [.jpeg, .heic])
        #expect(FormatGroup.split(files.filter { $0.path.hasSuffix(".jpg") }).isEmpty)
    }

    @Test("CPU confinement reaches every thread and the processes started afterwards, and is undone",
          .enabled(if: CPUAffinity.allowed().count >= 2, "needs two CPUs"))
    func confinement() throws {
        let allowed = CPUAffinity.allowed()
        let one = allowed.last!
        // A thread that exists before the call must be confined too.
        let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
        let lock = NSLock()
        nonisolated(unsafe) var seen: [Int] = []
        Thread {
            ready.signal()
            go.wait()
            let cpus = CPUAffinity.allowed()
            lock.withLock { seen = cpus }
            ready.signal()
        }.start()
        ready.wait()
        #expect(CPUAffinity.confine(to: [one]) == 0)
        defer { _ = CPUAffinity.confine(to: allowed) }
        go.signal()
        ready.wait()
        #expect(lock.withLock { seen } == [one])
        #expect(CPUAffinity.allowed() == [one])
        // So must a process started afterwards.
        let grep = try SpawnedProcess("/bin/grep", ["Cpus_allowed_list", "/proc/self/status"], stdout: .pipe)
        let line = String(decoding: grep.output!.readDataToEndOfFile(), as: UTF8.self)
        grep.wait()
        #expect(line.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix("\t\(one)"), "\(line)")
        #expect(CPUAffinity.confine(to: allowed) == 0)
        #expect(CPUAffinity.allowed() == allowed)
    }

    @Test("bench at --jobs 1 runs every side on one CPU and says which",
          .enabled(if: CPUAffinity.allowed().count >= 2, "needs two CPUs"))
    func benchConfinesOneJob() throws {
        let temp = Fixtures.tempDirectory("snapthumb-bench-test")
        defer { Fixtures.remove(temp) }
        let result = try CLI.run(["bench", Fixtures.sample("snaps"), "--jobs", "1", "--repeat", "1", "--json", "--temp-dir", temp])
        #expect(result.status == 0, "\(result.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let cpus = try #require(doc["cpus"] as? [String: [Int]], "\(doc["cpus"] ?? "no cpus key")")
        #expect(cpus == ["1": [CPUAffinity.allowed().first!]])
        let free = try CLI.run(["bench", Fixtures.sample("snaps"), "--jobs", "1", "--repeat", "1", "--json", "--no-confine-cpus", "--temp-dir", temp])
        let freeDoc = try #require(try JSONSerialization.jsonObject(with: Data(free.stdout.utf8)) as? [String: Any])
        #expect((freeDoc["cpus"] as? [String: [Int]]) == [:])
    }
}
