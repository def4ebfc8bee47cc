#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner

/// Runs command lines side by side and measures each with `wait4`, which gives a
/// child's own CPU time and peak RSS (with its waited-for descendants, e.g. a
/// Python pool's workers) rather than totals mixed with earlier children.
enum ChildProcesses {
    struct Outcome {
        /// Wall time from the first spawn to the last exit.
        var seconds: Double
        /// CPU seconds of all of them together.
        var cpuSeconds: Double
        /// The system (kernel) part of `cpuSeconds`.
        var systemSeconds: Double
        /// The largest single process's peak RSS.
        var peakRSSBytes: Int
        /// Exit status per command (128 + signal when killed); -1 when it could not start.
        var statuses: [Int32]
    }

    /// Starts every command at once, stdout and stderr to `/dev/null` unless
    /// `stderr` is given; returns when all have exited.
    static func run(_ commands: [[String]], environment: [String: String]? = nil, stderrPath: String = "/dev/null") -> Outcome {
        let start = DispatchTime.now().uptimeNanoseconds
        var pids: [pid_t] = []
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        for command in commands {
            pids.append(spawn(command, environment: env, stderrPath: stderrPath))
        }
        var cpu = 0.0, system = 0.0, peak = 0
        var statuses: [Int32] = []
        for pid in pids {
            guard pid > 0 else { statuses.append(-1); continue }
            var status: Int32 = 0
            var usage = rusage()
            while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
            let measured = ResourceUsage(usage)
            cpu += measured.cpuSeconds
            system += measured.systemSeconds
            peak = max(peak, measured.peakRSSBytes)
            // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
            let signal = status & 0x7F
            statuses.append(signal == 0 ? (status >> 8) & 0xFF : 128 + signal)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Outcome(seconds: seconds, cpuSeconds: cpu, systemSeconds: system, peakRSSBytes: peak, statuses: statuses)
    }

    private static func spawn(_ command: [String], environment: [String], stderrPath: String) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        // A signal this process ignores (SIGINT and SIGTERM, while bench catches them)
        // would stay ignored in the child: Python's multiprocessing stops its pool
        // with SIGTERM, and a worker that ignores it hangs the pool's shutdown.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t(), none = sigset_t()
        sigemptyset(&defaults)
        sigemptyset(&none)
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT] { sigaddset(&defaults, sig) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, command[0], &actions, &attributes, argv, envp)
        return status == 0 ? pid : -1
    }
}
