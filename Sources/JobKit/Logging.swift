import ArgumentParser
import Logging

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
        LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
    }()
}
