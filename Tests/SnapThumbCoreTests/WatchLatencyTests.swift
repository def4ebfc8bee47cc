import Foundation
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
