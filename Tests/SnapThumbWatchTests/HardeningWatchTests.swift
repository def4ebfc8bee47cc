@testable import SnapThumbRunner
import Testing

/// The daemon's backoff (the uploads and workers of the hardening checks run `snapthumb watch`: SnapThumbCLITests).
@Suite(.serialized) struct HardeningWatchTests {
    @Test func backoffDoublesOncePerFailureNotOncePerFailingWorker() {
        final class Clock: @unchecked Sendable { var now = 1000.0 }
        let clock = Clock()
        let backoff = Backoff(now: { clock.now })
        // Four jobs in flight fail on the same full store: one pause, not 1+2+4+8 s.
        #expect(backoff.next() == 1)
        clock.now += 0.25
        #expect(backoff.next() == 0.75)
        #expect(backoff.next() == 0.75)
        // The next failure after that pause doubles it.
        clock.now += 1
        #expect(backoff.next() == 2)
        clock.now += 2
        #expect(backoff.next() == 4)
        backoff.reset()
        #expect(backoff.next() == 1)
    }
}
