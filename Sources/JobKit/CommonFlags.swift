import ArgumentParser
import Foundation
import Postgres

/// `--format`.
public enum OutputFormat: String, ExpressibleByArgument, Sendable, CaseIterable {
    case text, json
}

/// An ISO 8601 instant given on the command line, in the years 1970 to 9000: year 0 (or a year 1 that a job
/// counts days back from) reached PostgreSQL as a date out of its range and ended the run as "a bug" (70).
public struct Instant: ExpressibleByArgument, Sendable {
    public var date: Date
    public static let years = 1970...9000
    public init?(argument: String) {
        guard let date = Timestamp.parse(argument),
              let year = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: date).year,
              Instant.years.contains(year) else { return nil }
        self.date = date
    }
    public static var defaultCompletionKind: CompletionKind { .default }
}
