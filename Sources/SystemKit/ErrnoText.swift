#if canImport(Glibc)
import Glibc
#endif

extension Errno: CustomStringConvertible {
    /// The system's sentence for the value (`strerror`), e.g. "Permission denied".
    public var description: String { String(cString: strerror(code)) }
}
