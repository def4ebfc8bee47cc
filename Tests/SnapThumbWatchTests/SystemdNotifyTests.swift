#if canImport(Glibc)
import Glibc
#endif
@testable import SystemKit
@testable import SnapThumbConfig
import Foundation
import Testing
@testable import SnapThumbRunner
@testable import SnapThumbWatch
import VipsKit

/// The daemon's side of systemd's `Type=notify`: when it speaks and when it is unhealthy
/// (`snapthumb watch` spoken to through a datagram socket: SnapThumbCLITests).
@Suite("systemd notify", .serialized)
struct SystemdNotifyTests {
    @Test("no NOTIFY_SOCKET: nothing is sent; WATCHDOG_PID of another process: no watchdog")
    func environment() {
        #expect(ServiceNotifier(environment: [:]).isActive == false)
        #expect(ServiceNotifier(environment: ["WATCHDOG_USEC": "1000000"]).watchdogInterval == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000"], pid: 42).watchdogInterval == 0.5)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "41"], pid: 42).watchdogInterval == nil)
        #expect(ServiceNotifier(environment: ["NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "42"], pid: 42).watchdogInterval == 0.5)
    }

    @Test("a worker stuck on one upload, or housekeeping that stopped, makes the loop unhealthy")
    func liveness() {
        final class Clock: @unchecked Sendable { var now = 1000.0 }
        let clock = Clock()
        let liveness = Liveness(stuckAfter: 75, housekeepingStaleAfter: 20, now: { clock.now })
        #expect(liveness.problem() == nil)
        liveness.began(worker: 0)
        clock.now += 70
        liveness.housekept()
        #expect(liveness.problem() == nil, "busy, but not yet past the limit")
        clock.now += 10
        liveness.housekept()
        #expect(liveness.problem()?.contains("worker 0") == true)
        liveness.ended(worker: 0)
        #expect(liveness.problem() == nil)
        clock.now += 30
        #expect(liveness.problem()?.contains("housekeeping") == true)
    }
}
