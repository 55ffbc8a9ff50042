import ArgumentParser
import Foundation
import Postgres

/// `--format`.
public enum OutputFormat: String, ExpressibleByArgument, Sendable, CaseIterable {
    case text, json
}

/// An ISO 8601 instant given on the command line.
public struct Instant: ExpressibleByArgument, Sendable {
    public var date: Date
    public init?(argument: String) {
        guard let date = Timestamp.parse(argument) else { return nil }
        self.date = date
    }
    public static var defaultCompletionKind: CompletionKind { .default }
}
