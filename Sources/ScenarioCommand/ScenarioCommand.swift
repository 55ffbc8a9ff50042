import ArgumentParser
import Delivery
import Foundation
import Synchronization
import JobKit
import ScenarioEngine

/// The command line of every scenario job: the shared flags, the push provider settings, the exit codes
/// in `--help`. A scenario's executable is one call: `ScenarioCommand.main(AssignmentFollowUp())`.
public struct ScenarioCommand: ParsableCommand {
    public static var configuration: CommandConfiguration {
        let scenario = ScenarioCommand.current.withLock { $0 }
        return CommandConfiguration(
            commandName: scenario?.jobName,
            abstract: scenario?.abstract ?? "",
            discussion: """
                Exit codes: 0 done (also nothing to do, or another run in progress), 64 bad flags, 65 bad data, \
                69 database or push provider unreachable (a provider: the notifications are stored, and push-deliver sends \
                them), 70 bug, 75 statement timeout or lock, 77 a login refused or a privilege missing, 78 configuration or schema problem (an \
                organization's invalid settings: the others still run; a provider refused our credentials). SIGTERM, SIGINT or SIGHUP: what was decided is recorded and what is in flight \
                finishes, then the job ends by that signal (143, 130, 129); a second SIGTERM or SIGINT ends it at once.
                """)
    }

    @OptionGroup public var options: JobOptions
    @OptionGroup(title: "Push providers (optional: without them deliveries wait for push-deliver)") public var delivery: DeliveryOptions

    public init() {}

    /// Parses the command line, runs `scenario` and exits with its status.
    public static func main(_ scenario: some Scenario) -> Never {
        current.withLock { $0 = AnyScenarioInfo(jobName: scenario.jobName, abstract: scenario.abstract) }
        do {
            let command = try ScenarioCommand.parse()
            let status = ScenarioRunner(scenario, options: command.options, delivery: ScenarioDelivery(options: command.delivery)).runAsJob()
            Foundation.exit(status.rawValue)
        } catch {
            exit(withError: error)
        }
    }

    struct AnyScenarioInfo: Sendable {
        var jobName: String
        var abstract: String
    }

    static let current = Mutex<AnyScenarioInfo?>(nil)
}
