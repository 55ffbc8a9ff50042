import Foundation
import JobKit
import Logging
import ScenarioEngine

/// Runs a scenario in-process against a test database, as River's `rivertest` or Oban's `perform_job`
/// do: the same engine as the executable, without a process in between. Returns the summary and, for a
/// dry run, the plan's JSON lines.
public enum ScenarioHarness {
    public struct Outcome {
        public var summary: ScenarioSummary
        /// The plan, one JSON object per line (dry runs).
        public var plan: [[String: Any]]
        public var runID: Int?
        public var outcome: String
        public var status: ExitStatus
    }

    public static func run<S: Scenario>(_ scenario: S, _ database: TestDatabase, now: Date, dryRun: Bool = false,
                                        _ extra: [String] = [], policies: [any Policy] = Policies.standard) throws -> Outcome {
        var arguments = ["--database-url", database.url, "--now", Jobs.iso(now)] + extra
        if dryRun { arguments += ["--dry-run", "--format", "json"] }
        let options = try JobOptions.parse(arguments)
        var logger = Logger(label: scenario.jobName)
        logger.logLevel = .warning
        let run = JobRun(job: scenario.jobName, dryRun: dryRun, asOf: now, logger: logger)
        let lines = PlanLines()
        var runner = ScenarioRunner(scenario, options: options, policies: policies)
        runner.planOutput = { lines.append($0) }
        let summary = try runner.execute(in: run)
        run.finishRecord()
        let plan = lines.all.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return Outcome(summary: summary, plan: plan, runID: run.runID, outcome: run.outcome, status: run.status)
    }
}

final class PlanLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
