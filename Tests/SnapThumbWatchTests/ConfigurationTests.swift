@testable import SystemKit
@testable import SnapThumbConfig
import Testing
@testable import SnapThumbWatch

@Suite struct ConfigurationTests {
    @Test func flagsWinOverEnvironmentWhichWinsOverTheFile() throws {
        let c = try WatchConfiguration.resolve(
            uploadDirectory: "/up",
            flags: ["jobs": "3"],
            environment: ["SNAPTHUMB_JOBS": "5", "SNAPTHUMB_DRAIN_TIMEOUT": "30s", "SNAPTHUMB_STORE": "/env-store"],
            file: ("c.json", ["drainTimeout": "10", "settle": "500ms", "store": "/file-store"]))
        #expect(c.jobs == 3)
        #expect(c.drainTimeout == 30)
        #expect(c.settle == 0.5)
        #expect(c.store == "/env-store")
    }

    @Test func defaults() throws {
        let c = try WatchConfiguration.resolve(uploadDirectory: "/up", flags: ["store": "/s"], environment: [:], file: nil)
        #expect(c.imageTimeout == 10 && c.drainTimeout == 25 && c.rescanInterval == 60 && c.maxAttempts == 3)
        #expect(c.afterSuccess == .move && !c.poll)
    }

    @Test func mistakesAreExplainedWithTheirSource() {
        func message(_ flags: [String: String], env: [String: String] = [:], file: [String: String]? = nil) -> String {
            do {
                _ = try WatchConfiguration.resolve(uploadDirectory: "/up", flags: flags, environment: env,
                                                   file: file.map { ("w.json", $0) })
                return ""
            } catch { return "\(error)" }
        }
        #expect(message([:]).contains("pass --store <dir>, set SNAPTHUMB_STORE"))
        #expect(message(["store": "/s", "jobs": "0"]) == "--jobs must be a whole number of at least 1 (got '0')")
        #expect(message(["store": "/s"], env: ["SNAPTHUMB_IMAGE_TIMEOUT": "soon"]).hasPrefix("SNAPTHUMB_IMAGE_TIMEOUT must be a positive duration"))
        #expect(message(["store": "/s"], file: ["drainTimeot": "3"]).contains("unknown setting watch.drainTimeot"))
        #expect(message(["store": "/s", "after-success": "archive"]).contains("move (keep sources in done/) or delete"))
    }

    @Test func durations() {
        #expect(WatchConfiguration.parseDuration("500ms") == 0.5)
        #expect(WatchConfiguration.parseDuration("5m") == 300)
        #expect(WatchConfiguration.parseDuration("7d") == 604_800)
        #expect(WatchConfiguration.parseDuration("2.5") == 2.5)
        #expect(WatchConfiguration.parseDuration("-1s") == nil)
    }

    @Test func uploadNames() {
        #expect(UploadName.isUpload("a.jpg"))
        #expect(!UploadName.isUpload(".a.jpg"))
        #expect(!UploadName.isUpload("a.jpg.part"))
        #expect(!UploadName.isUpload("a.jpg~"))
        #expect(UploadName.parse("a.jpg~attempt-2") == ("a.jpg", 2))
        #expect(UploadName.parse("a.jpg") == ("a.jpg", 0))
        #expect(UploadName.with(key: "a.jpg", attempts: 1) == "a.jpg~attempt-1")
    }

    /// One rule for the old `~attempt-<n>` marker: 1 to 9999, no sign, no leading
    /// zero, something before it; anything else is part of the key.
    @Test func attemptMarkerLimits() {
        #expect(UploadName.parse("r.jpg~attempt-1") == ("r.jpg", 1))
        #expect(UploadName.parse("r.jpg~attempt-9999") == ("r.jpg", 9999))
        for literal in ["r.jpg~attempt-10000", "r.jpg~attempt-9223372036854775807", "y.jpg~attempt-99999999999999999999",
                        "r.jpg~attempt-0", "r.jpg~attempt-007", "r.jpg~attempt-+5", "r.jpg~attempt--5", "r.jpg~attempt-",
                        "~attempt-3", "r.jpg~attempt-3x", "r.jpg~attempt-\u{0663}"] {
            #expect(UploadName.parse(literal) == (literal, 0), "\(literal)")
        }
        // Read by bytes: a combining mark after the '-' does not hide the marker's end.
        #expect(UploadName.parse("\u{301}a.jpg~attempt-2") == ("\u{301}a.jpg", 2))
        for n in [1, 3, 9999] { #expect(UploadName.parse(UploadName.with(key: "k.jpg", attempts: n)) == ("k.jpg", n)) }
    }
}
