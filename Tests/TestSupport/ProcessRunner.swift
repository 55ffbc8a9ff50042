import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion and captures what it printed. Built on posix_spawn and waitpid
/// rather than Foundation's `Process`, whose exit detection has hung here when the child leaves a
/// detached grandchild running (as `pg-cluster start --watch` does).
public enum ProcessRunner {
    public struct Result: Sendable {
        /// The exit code, or 128 + signal number if a signal ended the program.
        public var status: Int32
        /// The signal that ended the program, when one did (as opposed to exiting with 128 + n).
        public var signal: Int32?
        public var stdout: String
        public var stderr: String

        /// The last line of stdout parsed as JSON: every job's summary line.
        public var summary: [String: Any]? {
            guard let line = stdout.split(separator: "\n").last,
                  let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return object
        }
    }

    /// A started program, for tests that need to act while it runs (kill it, start another).
    public final class Running: @unchecked Sendable {
        public let pid: pid_t
        private let outFD: Int32
        private let errFD: Int32

        init(pid: pid_t, outFD: Int32, errFD: Int32) {
            self.pid = pid
            self.outFD = outFD
            self.errFD = errFD
        }

        /// Reads its output until it exits (killing it after `timeout` seconds) and returns the result.
        public func wait(timeout: TimeInterval = 120) throws -> Result {
            let deadline = Date().addingTimeInterval(timeout)
            var out = [UInt8](), err = [UInt8]()
            var open: [Int32: Bool] = [outFD: true, errFD: true]
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var timedOut = false
            while open.values.contains(true) {
                var fds = open.filter(\.value).map { pollfd(fd: $0.key, events: Int16(POLLIN), revents: 0) }
                let remaining = Int32(max(0, deadline.timeIntervalSinceNow) * 1000)
                if remaining == 0 { timedOut = true; kill(pid, SIGKILL); break }
                let ready = poll(&fds, nfds_t(fds.count), min(remaining, 1000))
                if ready < 0 && errno != EINTR { break }
                for fd in fds where fd.revents != 0 {
                    let count = read(fd.fd, &buffer, buffer.count)
                    if count <= 0 { open[fd.fd] = false; continue }
                    if fd.fd == outFD { out += buffer[0..<count] } else { err += buffer[0..<count] }
                }
            }
            close(outFD)
            close(errFD)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            if timedOut { throw TestSetupError("process \(pid) did not finish within \(Int(timeout)) s and was killed") }
            let signal = status & 0x7f
            return Result(status: signal == 0 ? (status >> 8) & 0xff : 128 + signal, signal: signal == 0 ? nil : signal,
                          stdout: String(decoding: out, as: UTF8.self),
                          stderr: String(decoding: err, as: UTF8.self))
        }
    }

    private static let spawnLock = NSLock()

    /// As a value in `environment`: the variable is not passed on at all (not even inherited from the tests).
    public static let unset = "\u{0}unset"

    /// Runs `executable` and waits for it.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval = 120) throws -> Result {
        try start(executable, arguments, environment: environment).wait(timeout: timeout)
    }

    /// Starts `executable` with stdin from /dev/null and stdout and stderr captured.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> Running {
        // One spawn at a time: a pipe must be close-on-exec before another thread's child could inherit it
        // (an inherited write end would keep our reader from ever seeing end of file).
        spawnLock.lock()
        defer { spawnLock.unlock() }
        var outPipe: [Int32] = [0, 0], errPipe: [Int32] = [0, 0]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else {
            throw TestSetupError("pipe failed: errno \(errno)")
        }
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)

        var env = ProcessInfo.processInfo.environment
        if let environment { env.merge(environment) { _, new in new } }
        env = env.filter { $0.value != ProcessRunner.unset }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { argv.forEach { free($0) }; envp.forEach { free($0) } }

        // Started as systemd or a shell starts it: no signal blocked, stop signals at their default action. The test
        // runner's threads block signals, and a child inherits that: a stop signal a job did not handle left it running
        // in a test instead of ending it at once.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), stops = sigset_t()
        sigemptyset(&none)
        sigemptyset(&stops)
        for number in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&stops, number) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &stops)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0]); close(errPipe[0])
            throw TestSetupError("cannot run \(executable): \(String(cString: strerror(rc)))")
        }
        return Running(pid: pid, outFD: outPipe[0], errFD: errPipe[0])
    }
}
