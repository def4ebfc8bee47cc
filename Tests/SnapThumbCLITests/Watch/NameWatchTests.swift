#if canImport(Glibc)
import Glibc
#endif
@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
import SnapThumbCore
import VipsKit

/// Upload names that a Character-based path split misreads (issue 23): a name
/// that starts with a combining mark is published like any other, and one that
/// fails is quarantined, not retried forever.
@Suite(.serialized) struct NameWatchTests {
    @Test func uploadsWhoseNamesStartWithACombiningMarkArePublishedAndQuarantined() throws {
        let h = try WatchHarness()
        let worker = try h.start()
        let good = "\u{301}a.jpg", bad = "\u{301}b.jpg"
        try h.drop(good, try TestImages.jpeg(7))
        try h.drop(bad, Array("not an image".utf8))
        eventually("the combining-mark upload is published", seconds: 30) {
            FileManager.default.fileExists(atPath: "\(h.store)/manifests/\(good).json")
        }
        eventually("both end in done/ or failed/", seconds: 30) {
            h.uploads(in: "done") == [good] && h.uploads(in: "failed") == [bad]
        }
        #expect(FileManager.default.fileExists(atPath: "\(h.uploads)/failed/\(bad).error.json"))
        #expect(h.uploads(in: "incoming").isEmpty)
        worker.signal(SIGTERM)
        #expect(worker.waitForExit(seconds: 30) == 0)
        #expect(try h.verifyStore() == 0)
    }
}
