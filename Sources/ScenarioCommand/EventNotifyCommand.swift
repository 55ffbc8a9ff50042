import ArgumentParser
import Delivery
import Foundation
import JobKit
import ScenarioEngine

/// `event-notify`'s command line: the shared flags, its own (`--once`, `--poll-interval`, …) and the push
/// provider settings. The executable is one call: `EventNotifyCommand.main([AvailabilityChange(), …])`.
public struct EventNotifyCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: EventNotifyRunner.job,
        abstract: "Turn events (pauses, new assignments, logged activities) into pushes seconds after their commit.",
        discussion: """
            Runs until stopped: LISTENs on mentor_push_events and drains the events table whenever woken and at \
            least every --poll-interval; reconnects with backoff when the database goes away. Several may run at once \
            (events are claimed with FOR UPDATE SKIP LOCKED). --once drains what is pending and exits. \
            Exit codes: 0 done, 64 bad flags, 65 an event row that cannot be read (set aside with the error), \
            69 database (--once; otherwise it retries) or push provider unreachable (the notifications are stored, \
            and push-deliver sends them), 70 bug, 75 statement timeout or lock, 77 a login refused or a privilege missing, \
            78 configuration or schema problem (an organization's events with invalid rules are set aside). SIGTERM, SIGINT or SIGHUP: the batch in progress commits and is pushed, then \
            the process ends by that signal (143, 130, 129).
            """)

    @OptionGroup public var options: SharedJobFlags

    @Flag(name: .long, help: "Drain the pending events and exit (for cron-only hosts, CI and tests).")
    public var once = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Look at the events table at least this often, in seconds, whatever NOTIFY says.", valueName: "seconds"))
    public var pollInterval: Double = 5

    @Flag(name: .long, help: "Do not LISTEN; poll only (a connection pooler in transaction mode cannot LISTEN).")
    public var noListen = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Events claimed per transaction.", valueName: "n"))
    public var batchSize: Int = 500

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Delete processed events older than this many days.", valueName: "days"))
    public var retentionDays: Int = 7

    @OptionGroup(title: "Push providers (optional: without them deliveries wait for push-deliver)") public var delivery: DeliveryOptions

    public init() {}

    public mutating func validate() throws {
        guard pollInterval >= 0.05 && pollInterval <= 3600 else { throw ValidationError("--poll-interval must be from 0.05 to 3600 seconds") }
        guard (1...10_000).contains(batchSize) else { throw ValidationError("--batch-size must be from 1 to 10000") }
        guard (1...3650).contains(retentionDays) else { throw ValidationError("--retention-days must be from 1 to 3650") }
        // An event is handled when it is processed: a real run as of another instant backdated its notification
        // and put its push due then (a catch-up means nothing to a service that takes events as they come).
        if !options.dryRun && options.now != nil {
            throw ValidationError("--now is for --dry-run only: event-notify handles each event as of when it processes it")
        }
    }

    /// Parses the command line, runs until stopped (or drained, with `--once`) and exits with its status.
    public static func main(_ scenarios: [any EventHandling]) -> Never {
        do {
            let command = try EventNotifyCommand.parse()
            var settings = EventNotifyRunner.Settings()
            settings.once = command.once
            settings.listen = !command.noListen
            settings.pollInterval = .milliseconds(Int64(command.pollInterval * 1000))
            settings.retentionDays = command.retentionDays
            let processor = EventProcessor(scenarios, batchSize: command.batchSize)
            let runner = EventNotifyRunner(processor, options: JobOptions(command.options), settings: settings,
                                           delivery: ScenarioDelivery(options: command.delivery, finishesOnStop: true))
            Foundation.exit(runner.runAsJob().rawValue)
        } catch {
            exit(withError: error)
        }
    }
}
