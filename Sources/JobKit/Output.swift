#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Buffered writes to stdout: the plan of a million candidates goes through stdio's buffer, not a
/// system call per line. Jobs write from one thread.
public enum Output {
    // Our own FILE on fd 1: Swift 6 cannot touch the C global `stdout`.
    nonisolated(unsafe) private static let stream: UnsafeMutablePointer<FILE> = fdopen(STDOUT_FILENO, "w")

    public static func write(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = fwrite(bytes.baseAddress, 1, bytes.count, stream) }
    }

    public static func line(_ text: String) {
        write(text)
        fputc(10, stream)
    }

    public static func flush() { fflush(stream) }
}
