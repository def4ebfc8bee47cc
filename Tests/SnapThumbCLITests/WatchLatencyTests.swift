@testable import SnapThumbStore
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
@_spi(Testing) import SnapThumbTesting
import Testing
@testable import SnapThumbCore
@testable import SnapThumbBench

@Suite("Watch latency probe")
struct WatchLatencyTests {
    @Test("every renamed upload is seen published, with ordered percentiles")
    func probe() throws {
        let images = [Fixtures.sample("snaps/phone-portrait.jpg"), Fixtures.sample("snaps/landscape.webp")]
        let report = try WatchLatency.measure(executable: CLI.binary, images: images, count: 40, rate: 50, jobs: 2)
        #expect(report.files == 40)
        #expect(report.missing == 0)
        #expect(report.p50_ms > 0)
        #expect(report.p50_ms <= report.p95_ms && report.p95_ms <= report.p99_ms && report.p99_ms <= report.max_ms)
    }
}

@Suite("Watch burst probe")
struct WatchBurstTests {
    @Test("a burst drains completely into done/ and failed/, and both sides report a rate")
    func burst() throws {
        // A refused file too: it drains into failed/, and counts.
        let images = ["snaps/phone-portrait.jpg", "snaps/landscape.webp", "snaps/tiny.png", "bad/truncated.jpg"]
            .map(Fixtures.sample)
        let report = try WatchBurst.measure(executable: CLI.binary, images: images + images, jobs: 2, rounds: 2)
        #expect(report.files == 8 && report.rounds == 2)
        #expect(report.missing == 0)
        #expect(report.watch_images_per_second > 0 && report.backfill_images_per_second > 0)
        #expect(report.ratio_min <= report.ratio && report.ratio <= report.ratio_max)
    }
}
