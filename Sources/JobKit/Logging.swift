import ArgumentParser
import Logging
import TextCoding

/// `--log-level`.
public enum LogLevelOption: String, ExpressibleByArgument, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error

    public var level: Logger.Level { Logger.Level(rawValue: rawValue) ?? .info }
}

/// Logging for jobs: to stderr, so stdout carries only the plan and the summary line.
public enum JobLogging {
    /// Sets up swift-log once per process and returns a logger labelled with the job's name.
    public static func logger(job: String, level: LogLevelOption) -> Logger {
        bootstrapOnce
        var logger = Logger(label: job)
        logger.logLevel = level.level
        return logger
    }

    private static let bootstrapOnce: Void = {
        LoggingSystem.bootstrap { label in OneLineLogHandler(StreamLogHandler.standardError(label: label)) }
    }()
}

/// A log handler that keeps each message on its one line: the messages carry outside text (an organization's
/// name, a setting's value, a row's reason), and a line break in it forged a log line of its own in the
/// journal, an escape sequence rewrote the terminal of whoever tailed it. Control characters and the line and
/// paragraph separators become U+FFFD (`OutsideText.neutralized`), and bidirectional controls are shown as
/// `\u{…}` (`OutsideText.printable`), in the message and the call's metadata.
struct OneLineLogHandler: LogHandler {
    var inner: StreamLogHandler

    init(_ inner: StreamLogHandler) { self.inner = inner }

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(OutsideText.printable(OutsideText.neutralized(event.message.description)))"
        event.metadata = event.metadata?.mapValues { .string(OutsideText.printable(OutsideText.neutralized($0.description))) }
        inner.log(event: event)
    }
}
