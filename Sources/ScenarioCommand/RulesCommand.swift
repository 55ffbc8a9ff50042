import ArgumentParser
import Foundation
import JobKit
import Operations
import Postgres
import ScenarioEngine
import TextCoding

/// `rules`: every organization's effective scenario rules (its own row over the defaults), a check of them
/// with the jobs' own validation, and a what-if that counts whom a proposed setting would notify now,
/// without saving anything.
public struct RulesCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "Show every organization's effective scenario rules, check them, and count what a proposed change would notify (nothing is saved).",
        discussion: """
            rules                                        each organization's rules: on/off and settings, and whether they are its own or the defaults
            rules --validate                             check every organization's rules as the jobs do (78 when one is invalid)
            rules --dry-run --set inactivity.threshold_days=7 [--org UUID]
                                                         how many people the change would notify now, beside the rules as they are
            A proposed value is checked as the database checks any rule (an unknown key or a bad value: 64) and \
            counted in memory: nothing is written or locked. Exit codes: 0 done, 64 bad flags or proposal, 69 database unreachable, \
            75 statement timeout or lock, 77 a login refused or a privilege missing, 78 an invalid rule (with --validate) or configuration problem.
            """)

    @Option(name: .customLong("org"), help: ArgumentHelp("Only this organization (repeatable).", valueName: "uuid"))
    var organizations: [OrganizationID] = []

    @Option(help: ArgumentHelp("Only this scenario (its key, e.g. inactivity).", valueName: "key"))
    var scenario: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("A proposed setting, with --dry-run (repeatable).", valueName: "scenario.key=value"))
    var proposals: [String] = []

    @Flag(help: "With --set: count what the proposal would notify now; save nothing.")
    var dryRun = false

    @Flag(name: .customLong("validate"), help: "Check every organization's rules with the jobs' own validation.")
    var checkRules = false

    @Option(help: "Output format: text or json.")
    var format: OutputFormat = .text

    @Option(help: ArgumentHelp("Evaluate the what-if as of this instant (ISO 8601, years 1970 to 9000).", valueName: "instant"))
    var now: Instant?

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL. Default: $DATABASE_URL, else libpq's PG* variables.", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, help: ArgumentHelp("Log level on stderr.", valueName: "level"))
    var logLevel: LogLevelOption = .info

    public init() {}

    public func validate() throws {
        if !proposals.isEmpty && !dryRun { throw ValidationError("--set proposes a change and saves nothing: add --dry-run") }
        if dryRun && proposals.isEmpty { throw ValidationError("--dry-run needs at least one --set scenario.key=value") }
        // Each of these was ignored without a word: the answer was to another question than the one asked.
        if checkRules && dryRun {
            throw ValidationError("--validate checks the rules as they are and --dry-run --set counts a proposal: give one of them")
        }
        if now != nil && !dryRun { throw ValidationError("--now is the instant of the what-if: use it with --dry-run --set") }
        for proposal in proposals {
            let (key, _, _) = try Self.parse(proposal)
            if let scenario, key != scenario {
                throw ValidationError("--set \(proposal): --scenario \(scenario) names another scenario (the what-if counts the scenarios it sets)")
            }
        }
        try JobDatabase.validateURLFlag(databaseURL)
    }

    /// "inactivity.threshold_days=7" → ("inactivity", "threshold_days", 7 as JSON text).
    static func parse(_ proposal: String) throws -> (scenario: String, key: String, value: String) {
        guard let equals = proposal.firstIndex(of: "="), let dot = proposal[..<equals].firstIndex(of: ".") else {
            throw ValidationError("--set \(proposal): expected scenario.key=value, e.g. inactivity.threshold_days=7")
        }
        let value = String(proposal[proposal.index(after: equals)...])
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(value.utf8), options: .fragmentsAllowed) else {
            throw ValidationError("--set \(proposal): the value must be JSON (7, [25, 50], \"text\")")
        }
        // PostgreSQL's jsonb refuses a NUL (\u0000) in a string: it ended the what-if as a bug (70).
        func holdsNUL(_ value: Any) -> Bool {
            switch value {
            case let text as String: return text.contains("\u{0}")
            case let array as [Any]: return array.contains(where: holdsNUL)
            case let object as [String: Any]: return object.contains { holdsNUL($0.key) || holdsNUL($0.value) }
            default: return false
            }
        }
        if holdsNUL(parsed) { throw ValidationError("--set \(proposal): the value holds a NUL character (\\u0000), which the database cannot store") }
        return (String(proposal[..<dot]), String(proposal[proposal.index(after: dot)..<equals]), value)
    }

    /// Parses the command line, runs, and exits with the status.
    public static func main(_ scenarios: [any Scenario]) -> Never {
        do {
            let command = try RulesCommand.parse()
            Foundation.exit(command.run(scenarios).rawValue)
        } catch {
            exit(withError: error)
        }
    }

    /// A line of the text output: names, keys and messages come from the database, and a control character or an
    /// escape sequence in one (an organization named by a careless app) reached the operator's terminal raw.
    private func say(_ text: String) { Output.line(OutsideText.printable(text)) }

    func run(_ scenarios: [any Scenario]) -> ExitStatus {
        JobEnvelope.run("rules", dryRun: true, asOf: (dryRun ? now?.date : nil) ?? Date(), logLevel: logLevel, writes: false) { run in
            let connection = try JobDatabase.connect(url: JobDatabase.url(flag: databaseURL), name: "rules")
            try Schema.check(connection)
            var named = Set<UUID>()
            let ids = organizations.map(\.id).filter { named.insert($0).inserted }
            let known: Set<UUID> = Set(try connection.query("""
                SELECT id FROM organizations WHERE id = ANY(\(PostgresArray(ids))::uuid[])
                """).map { try $0.decode(0) })
            if let missing = ids.first(where: { !known.contains($0) }) {
                throw JobFailure(.usage, "--org \(missing.lowercasedString): no such organization")
            }
            let selected = scenarios.filter { scenario == nil || $0.key == scenario }
            // A rule row may be the app's own (activity_reminder: no job of ours sends it, `rules` lists it): shown
            // and validated like the others; it has no settings of ours to check.
            let rows = Set(try connection.query("SELECT scenario FROM scenario_defaults").map { try $0.decode(0, as: String.self) })
            if let scenario, selected.isEmpty, !rows.contains(scenario) {
                throw JobFailure(.usage, "--scenario \(scenario): no such scenario (scenarios: \(rows.union(scenarios.map(\.key)).sorted().joined(separator: ", ")))")
            }
            if dryRun {
                try whatIf(scenarios, organizations: ids, connection: connection)
            } else if checkRules {
                var invalid = 0
                for scenario in selected { invalid += try check(scenario, organizations: ids, connection: connection) }
                if format == .text {
                    say(invalid == 0 ? "every organization's rules are valid" : "\(invalid) invalid rule(s) (above): the jobs skip those organizations")
                }
                if invalid > 0 { run.degrade(.config, "\(invalid) organization rule(s) are invalid") }
                run.counts = { var writer = JSONWriter(); writer.add("invalid", invalid); return writer }
            } else {
                try show(organizations: ids, connection: connection)
            }
        }
    }

    /// The organizations whose rule for `scenario` the jobs would refuse, printed; returns how many.
    func check<S: Scenario>(_ scenario: S, organizations: [UUID], connection: Connection) throws -> Int {
        let (_, invalid) = try RuleLoader.load(scenario, only: organizations, from: connection)
        for failure in invalid {
            switch format {
            case .text: say("INVALID \(failure.message)")
            case .json:
                var writer = JSONWriter()
                writer.add("scenario", scenario.key)
                writer.add("invalid", failure.message)
                Output.line(writer.json)
            }
        }
        return invalid.count
    }

    func whatIf(_ scenarios: [any Scenario], organizations: [UUID], connection: Connection) throws {
        var byScenario: [(String, [(String, String)])] = []
        for proposal in proposals {
            let (scenario, key, value) = try Self.parse(proposal)
            // Given twice, one value would be dropped without a word (and the header showed both, as JSON no tool reads).
            if byScenario.contains(where: { $0.0 == scenario && $0.1.contains { $0.0 == key } }) {
                throw JobFailure(.usage, "--set \(scenario).\(key) is given twice: give each setting once")
            }
            if let index = byScenario.firstIndex(where: { $0.0 == scenario }) { byScenario[index].1.append((key, value)) }
            else { byScenario.append((scenario, [(key, value)])) }
        }
        for (key, settings) in byScenario {
            guard let scenario = scenarios.first(where: { $0.key == key }) else {
                throw JobFailure(.usage, "--set \(key)…: no such scenario (scenarios: \(scenarios.map(\.key).sorted().joined(separator: ", ")))")
            }
            // Decided one event at a time, as it comes: there are no candidates to count ahead (it said "would
            // notify 0 of 0", as if the change did nothing).
            if scenario is any EventScenario {
                throw JobFailure(.usage, "--set \(key)…: \(key) is decided per event as it happens (event-notify), so there are no candidates to count ahead; the what-if counts the scheduled scenarios (\(scenarios.filter { !($0 is any EventScenario) }.map(\.key).sorted().joined(separator: ", ")))")
            }
            let json = "{" + settings.map { JSONWriter.string($0.0) + ": " + $0.1 }.joined(separator: ", ") + "}"
            let (current, proposed): (WhatIf.Count, WhatIf.Count)
            do {
                (current, proposed) = try WhatIf.compare(scenario, settings: json, organizations: organizations, on: connection, now: now?.date ?? Date())
            } catch let error as PostgresError where error.sqlState == "23514" {
                throw JobFailure(.usage, "--set: \(error)")
            }
            let scope = organizations.isEmpty ? "every organization" : "\(organizations.count) organization(s)"
            switch format {
            case .text:
                say("\(key) \(json) for \(scope), as of \(now.map { Timestamp.iso8601($0.date) } ?? "now"):")
                say("  would notify \(proposed.notified) of \(proposed.candidates) candidates (as the rules are: \(current.notified) of \(current.candidates))")
                let reasons = Set(proposed.suppressed.keys).union(current.suppressed.keys).sorted()
                for reason in reasons {
                    say("  suppressed \(reason): \(proposed.suppressed[reason] ?? 0) (as the rules are: \(current.suppressed[reason] ?? 0))")
                }
                if proposed.invalidOrganizations > 0 {
                    say("  not counted: \(proposed.invalidOrganizations) organization(s) with invalid settings or templates, which the jobs skip too (see rules --validate)")
                }
            case .json:
                var writer = JSONWriter()
                writer.add("scenario", key)
                writer.add("settings", json: json)
                writer.add("notified", proposed.notified)
                writer.add("candidates", proposed.candidates)
                writer.add("notified_now", current.notified)
                writer.add("candidates_now", current.candidates)
                writer.add("invalid_organizations", proposed.invalidOrganizations)
                Output.line(writer.json)
            }
        }
    }

    func show(organizations: [UUID], connection: Connection) throws {
        let filter: PostgresArray<UUID>? = organizations.isEmpty ? nil : PostgresArray(organizations)
        let orgs = try connection.query("""
            SELECT id, name FROM organizations WHERE \(filter)::uuid[] IS NULL OR id = ANY(\(filter)::uuid[]) ORDER BY name, id
            """)
        for row in orgs {
            let id: UUID = try row.decode(0)
            let name: String = try row.decode(1)
            let rules = try WhyReport.rules(connection, id, scenario: scenario)
            switch format {
            case .text:
                say("\(name) (\(id.lowercasedString))")
                for rule in rules {
                    let source = rule.organizationRow == nil ? "defaults" : "its own row over the defaults"
                    say("  \(rule.scenario.padding(toLength: 21, withPad: " ", startingAt: 0)) \(rule.enabled ? "on " : "OFF")  \(rule.settings)  (\(source))  priority \(rule.priority)")
                    if let problem = rule.problem {
                        say("  \("".padding(toLength: 21, withPad: " ", startingAt: 0)) INVALID: \(problem): the jobs skip this organization for \(rule.scenario)")
                    }
                }
                say("  delivery: " + (try deliveryPolicy(id, connection: connection)))
            case .json:
                for rule in rules {
                    var writer = JSONWriter()
                    writer.add("organization_id", id.lowercasedString)
                    writer.add("organization", name)
                    writer.add("scenario", rule.scenario)
                    writer.add("enabled", rule.enabled)
                    writer.add("settings", json: rule.settings)
                    writer.add("own_row", rule.organizationRow != nil)
                    writer.add("priority", rule.priority)
                    writer.add("problem", rule.problem)
                    Output.line(writer.json)
                }
            }
        }
    }

    /// An organization's delivery policies in one line: quiet hours, daily cap, critical categories,
    /// channels other than the defaults, and its own message templates.
    func deliveryPolicy(_ organization: UUID, connection: Connection) throws -> String {
        let row = try connection.query("""
            SELECT to_char(p.quiet_hours_start, 'HH24:MI') || '-' || to_char(p.quiet_hours_end, 'HH24:MI'), p.daily_push_cap,
                   array_to_string(p.critical_categories, ', '),
                   (SELECT string_agg(c.category || ' ' || c.channels, ', ' ORDER BY c.category) FROM organization_category_channels c
                     WHERE c.organization_id = \(organization)),
                   (SELECT string_agg(t.scenario || '/' || t.language, ', ' ORDER BY t.scenario, t.language) FROM message_templates t
                     WHERE t.organization_id = \(organization))
              FROM (SELECT \(organization)::uuid AS id) o
              LEFT JOIN organization_delivery_policies p ON p.organization_id = o.id
            """).first!
        var parts: [String] = []
        parts.append("quiet hours " + (try row.decode(0, as: String?.self) ?? "none"))
        parts.append("daily cap " + ((try row.decode(1, as: Int?.self)).map(String.init) ?? "none"))
        let critical = try row.decode(2, as: String?.self) ?? ""
        parts.append("critical " + (critical.isEmpty ? "none" : critical))
        if let channels = try row.decode(3, as: String?.self) { parts.append("channels " + channels) }
        if let templates = try row.decode(4, as: String?.self) { parts.append("own templates " + templates) }
        return parts.joined(separator: "; ")
    }
}
