import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time and peak memory from `getrusage`.
public struct ResourceUsage: Sendable, Equatable {
    /// User + system CPU seconds.
    public var cpuSeconds: Double
    /// Peak resident set size in bytes (`ru_maxrss`).
    public var peakRSSBytes: Int

    public init(cpuSeconds: Double, peakRSSBytes: Int) {
        self.cpuSeconds = cpuSeconds
        self.peakRSSBytes = peakRSSBytes
    }

    /// This process (every thread).
    public static var current: ResourceUsage { read(who(RUSAGE_SELF)) }

    /// This process's own peak RSS in bytes: `VmHWM` where /proc has it, else `ru_maxrss`.
    /// A child started with posix_spawn (vfork) inherits its parent's `ru_maxrss` as a
    /// floor across exec, so a worker's `ru_maxrss` would report the parent's size.
    public static var ownPeakRSSBytes: Int {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") {
            return kib * 1024
        }
        return current.peakRSSBytes
    }

    /// Children this process has waited for, with their own waited-for
    /// descendants. The peak is that of the largest single child ever, not a sum.
    public static var children: ResourceUsage { read(who(RUSAGE_CHILDREN)) }

    // Glibc imports RUSAGE_* as an enum while getrusage takes an int.
    #if os(Linux)
    private static func who(_ w: __rusage_who) -> Int32 { Int32(truncatingIfNeeded: w.rawValue) }
    #else
    private static func who(_ w: Int32) -> Int32 { w }
    #endif

    private static func read(_ who: Int32) -> ResourceUsage {
        var usage = rusage()
        _ = getrusage(who, &usage)
        return ResourceUsage(usage)
    }

    init(_ usage: rusage) {
        cpuSeconds = Self.seconds(usage.ru_utime) + Self.seconds(usage.ru_stime)
        peakRSSBytes = Self.maxRSSBytes(usage.ru_maxrss)
    }

    private static func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }

    /// `ru_maxrss` is KiB on Linux, bytes on Darwin.
    static func maxRSSBytes(_ value: Int) -> Int {
        #if os(Linux)
        return value * 1024
        #else
        return value
        #endif
    }
}
