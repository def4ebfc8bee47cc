#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time and peak memory from `getrusage`.
public struct ResourceUsage: Sendable, Equatable {
    /// User + system CPU seconds.
    public var cpuSeconds: Double
    /// The system (kernel) part of `cpuSeconds`: system calls, page faults.
    public var systemSeconds: Double
    /// Peak resident set size in bytes (`ru_maxrss`).
    public var peakRSSBytes: Int

    public init(cpuSeconds: Double, systemSeconds: Double = 0, peakRSSBytes: Int) {
        self.cpuSeconds = cpuSeconds
        self.systemSeconds = systemSeconds
        self.peakRSSBytes = peakRSSBytes
    }

    /// This process (every thread).
    public static var current: ResourceUsage { read(who(RUSAGE_SELF)) }

    /// This process's own peak RSS in bytes: `VmHWM` where /proc has it, else `ru_maxrss`.
    /// A child started with posix_spawn (vfork) inherits its parent's `ru_maxrss` as a
    /// floor across exec, so a worker's `ru_maxrss` would report the parent's size.
    public static var ownPeakRSSBytes: Int {
        // One pread(2) of a file kept open: workers call this once per job.
        #if os(Linux)
        let fd = statusFile
        if fd >= 0 {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0, let range = findField(Array("VmHWM:".utf8), in: buffer[0..<n]) {
                var kib = 0
                for byte in buffer[range.upperBound..<n] {
                    if byte == 0x20 || byte == 0x09 { if kib == 0 { continue } else { break } }
                    guard byte >= 0x30, byte <= 0x39 else { break }
                    kib = kib * 10 + Int(byte - 0x30)
                }
                if kib > 0 { return kib * 1024 }
            }
        }
        #endif
        return current.peakRSSBytes
    }

    #if os(Linux)
    /// /proc/self/status, opened on first use and kept for the process's life
    /// (reading it again from offset 0 gives fresh figures).
    private static let statusFile: Int32 = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
    #endif

    private static func findField(_ name: [UInt8], in bytes: ArraySlice<UInt8>) -> Range<Int>? {
        var i = bytes.startIndex
        while i + name.count <= bytes.endIndex {
            if bytes[i..<(i + name.count)].elementsEqual(name) { return i..<(i + name.count) }
            i += 1
        }
        return nil
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

    public init(_ usage: rusage) {
        systemSeconds = Self.seconds(usage.ru_stime)
        cpuSeconds = Self.seconds(usage.ru_utime) + systemSeconds
        peakRSSBytes = Self.maxRSSBytes(usage.ru_maxrss)
    }

    private static func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }

    /// `ru_maxrss` is KiB on Linux, bytes on Darwin.
    public static func maxRSSBytes(_ value: Int) -> Int {
        #if os(Linux)
        return value * 1024
        #else
        return value
        #endif
    }
}
