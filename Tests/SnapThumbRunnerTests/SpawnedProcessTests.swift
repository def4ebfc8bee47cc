#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import Testing
@testable import SystemKit

/// Worker processes are started from several supervisor threads at once. A child must
/// hold nothing of its siblings': a worker holding another's input keeps that one from
/// ever seeing its end.
@Suite struct SpawnedProcessTests {
    /// The pipes and sockets child `pid` holds beyond its standard streams (what it opens
    /// itself as it starts, a locale file say, is neither).
    private func inheritedPipes(of pid: Int32) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return names.compactMap { name -> String? in
            guard let fd = Int(name), fd > 2,
                  let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)"),
                  target.hasPrefix("pipe:") || target.hasPrefix("socket:") else { return nil }
            return "\(fd) → \(target)"
        }
    }

    @Test func childrenStartedFromManyThreadsAtOnceHoldOnlyTheirOwnStreams() throws {
        // Three at a time from three threads, each with a pipe in and out, as a pool
        // starts its workers, while the test process has other descriptors open.
        let extra = Mutex<[String]>([])
        for _ in 0..<100 {
            let group = DispatchGroup()
            for _ in 0..<3 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    guard let child = try? SpawnedProcess("/bin/sleep", ["5"], stdin: .pipe, stdout: .pipe) else {
                        extra.withLock { $0.append("could not start /bin/sleep") }
                        return
                    }
                    // posix_spawn returns after the exec: what the child holds is final.
                    let held = inheritedPipes(of: child.processIdentifier)
                    if !held.isEmpty { extra.withLock { $0.append("pid \(child.processIdentifier): \(held)") } }
                    child.signal(SIGKILL)
                    child.wait()
                }.start()
            }
            group.wait()
        }
        #expect(extra.withLock { $0 }.isEmpty)
    }

    @Test func itsPipesAreCloseOnExecAndItsEndIsSeenWhileAnotherChildLives() throws {
        let cat = try SpawnedProcess("/bin/cat", [], stdin: .pipe, stdout: .pipe)
        for handle in [cat.input!, cat.output!] {
            #expect(fcntl(handle.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0)
            #expect(handle.fileDescriptor > 2)
        }
        // A long-lived child started after it (as a server is) holds none of its pipes:
        // closing cat's input ends cat at once.
        let bystander = try SpawnedProcess("/bin/sleep", ["60"])
        defer { bystander.signal(SIGKILL); bystander.wait() }
        try cat.input!.write(contentsOf: Data("hello\n".utf8))
        try cat.input!.close()
        #expect(cat.output!.readDataToEndOfFile() == Data("hello\n".utf8))
        #expect(cat.wait() == SpawnedProcess.Ending(code: 0, signaled: false))
        #expect(bystander.isRunning)
    }

    @Test func exitStatusSignalAndNoSignalAfterTheReap() throws {
        let failing = try SpawnedProcess("/bin/sh", ["-c", "exit 3"])
        #expect(failing.wait() == SpawnedProcess.Ending(code: 3, signaled: false))
        #expect(failing.terminationReason == .exit)
        #expect(!failing.isRunning)
        // Reaped: its pid may be another process's now, so nothing is sent.
        #expect(!failing.signal(SIGTERM))

        let sleeper = try SpawnedProcess("/bin/sleep", ["60"])
        #expect(sleeper.isRunning)
        #expect(sleeper.signal(SIGKILL))
        #expect(sleeper.wait() == SpawnedProcess.Ending(code: SIGKILL, signaled: true))
        #expect(sleeper.terminationReason == .uncaughtSignal)
        #expect(sleeper.wait().description == "signal 9")

        // Several threads may wait; each hears the same ending.
        let waited = try SpawnedProcess("/bin/sh", ["-c", "sleep 0.2; exit 7"])
        let codes = Mutex<[Int32]>([])
        let group = DispatchGroup()
        for _ in 0..<3 {
            group.enter()
            Thread { codes.withLock { $0.append(waited.wait().code) }; group.leave() }.start()
        }
        group.wait()
        #expect(codes.withLock { $0 } == [7, 7, 7])
    }

    @Test func aProgramThatCannotStartIsAnErrorNamingWhy() {
        #expect(throws: Errno(ENOENT)) { try SpawnedProcess("/no/such/program", []) }
    }

    @Test func itsOwnProcessGroupUnlessAskedOtherwise() throws {
        let own = try SpawnedProcess("/bin/sleep", ["60"])
        let shared = try SpawnedProcess("/bin/sleep", ["60"], ownProcessGroup: false)
        defer { for child in [own, shared] { child.signal(SIGKILL); child.wait() } }
        #expect(getpgid(own.processIdentifier) == own.processIdentifier)
        #expect(getpgid(shared.processIdentifier) == getpgrp())
    }
}
