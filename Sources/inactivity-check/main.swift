import ArgumentParser
import Delivery
import JobKit
import Scenarios

/// Reminds peer mentors who have not logged an activity for longer than their organization's threshold.
@main
struct InactivityCheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inactivity-check",
        abstract: "Remind peer mentors who have not logged an activity for longer than their organization's threshold.",
        discussion: "Exit codes: 0 done (also nothing to do, or another run in progress), 64 bad flags, 65 bad data, 69 database unreachable, 70 bug, 75 statement timeout, 78 configuration or schema problem. SIGTERM or SIGINT: what was decided is recorded and what is in flight finishes, then the job ends by that signal (143, 130); a second one ends it at once.")

    @OptionGroup var options: JobOptions
    @OptionGroup(title: "Push providers (optional: without them deliveries wait for push-deliver)") var delivery: DeliveryOptions

    func run() throws {
        let status = JobRunner.run(InactivityCheck(), options: options, delivery: ScenarioDelivery(options: delivery))
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
