import Foundation
import JobKit
import Postgres
import TextCoding

/// One organization's rule for a scenario: on or off, and its validated settings (the scenario's
/// defaults from `scenario_defaults`, overridden key by key by `organization_scenario_rules`).
public struct OrganizationRule<Settings: Sendable>: Sendable {
    public var organizationID: UUID
    public var organizationName: String
    public var enabled: Bool
    public var settings: Settings
    /// The organization's default locale and time zone, for users who set none.
    public var defaultLocale: String
    public var timeZone: String
    /// The scenario's priority for users' daily slots (1 comes first): the organization's, else the default.
    public var priority: Int
    /// The scenario's message templates for this organization (its own, else the defaults).
    public var messages: MessageTemplates
    /// `defaultLocale` resolved once, among the languages there are templates for.
    public var defaultLanguage: Language
}

/// Reads one organization's merged settings object, with messages that name the organization and key.
public struct SettingsReader {
    public let scenario: String
    public let organizationName: String
    public let organizationID: UUID
    let values: [String: JSONTree]
    /// The keys the organization's own row sets (or `rules --dry-run --set` proposes): a bad value of any other came
    /// from `scenario_defaults`, and the message says to fix that row, not the organization's.
    let ownKeys: Set<String>
    /// The keys the scenario asked for: any other key in the row is a typo or a leftover, and fails.
    private let asked = KeysAsked()

    init(scenario: String, organizationName: String, organizationID: UUID, values: [String: JSONTree], ownKeys: Set<String>) {
        self.scenario = scenario
        self.organizationName = organizationName
        self.organizationID = organizationID
        self.values = values
        self.ownKeys = ownKeys
    }

    /// Where the value of `key` is to be fixed.
    func fixIt(_ key: String) -> String {
        ownKeys.contains(key) ? "fix its row in organization_scenario_rules"
            : "the value comes from scenario_defaults (every organization without its own inherits it): fix the \(scenario) row there, or set the organization's own"
    }

    /// Fails on the first key the scenario did not ask for (say `threshold_dayz`, which would otherwise
    /// leave the default in force without a word).
    func checkNoUnknownKeys() throws {
        let known = asked.keys
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) {
            throw JobFailure(.config, "organization \"\(organizationName)\" (\(organizationID.lowercasedString)): \(scenario).\(unknown) is not a setting of \(scenario) (its settings: \(known.sorted().joined(separator: ", "))); \(fixIt(unknown))")
        }
    }

    func fail(_ key: String, _ expectation: String, found: JSONTree?) -> JobFailure {
        JobFailure(.config, "organization \"\(organizationName)\" (\(organizationID.lowercasedString)): \(scenario).\(key) must be \(expectation), found \(found?.description ?? "nothing"); \(fixIt(key))")
    }

    /// An integer setting within `range`.
    public func integer(_ key: String, in range: ClosedRange<Int>) throws -> Int {
        asked.insert(key)
        guard case .integer(let value)? = values[key], range.contains(value) else {
            throw fail(key, "an integer from \(range.lowerBound) to \(range.upperBound)", found: values[key])
        }
        return value
    }

    /// A non-empty list of distinct integers, each within `range`, sorted.
    public func integers(_ key: String, in range: ClosedRange<Int>) throws -> [Int] {
        asked.insert(key)
        let expectation = "a non-empty list of integers from \(range.lowerBound) to \(range.upperBound)"
        guard case .array(let items)? = values[key], !items.isEmpty else { throw fail(key, expectation, found: values[key]) }
        var result: [Int] = []
        for item in items {
            guard case .integer(let value) = item, range.contains(value) else { throw fail(key, expectation, found: values[key]) }
            result.append(value)
        }
        return Array(Set(result)).sorted()
    }
}

/// The keys a `SettingsReader` was asked for.
private final class KeysAsked: @unchecked Sendable {
    private(set) var keys = Set<String>()
    func insert(_ key: String) { keys.insert(key) }
}

/// A parsed JSON value that keeps booleans, integers and other numbers apart.
public indirect enum JSONTree: Decodable, Sendable, CustomStringConvertible {
    case null, bool(Bool), integer(Int), number(Double), string(String), array([JSONTree]), object([String: JSONTree])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONTree].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONTree].self)) }
    }

    public init(json: String) throws {
        self = try JSONDecoder().decode(JSONTree.self, from: Data(json.utf8))
    }

    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return String(value)
        case .integer(let value): return String(value)
        case .number(let value): return String(value)
        case .string(let value): return JSONWriter.string(value)
        case .array(let items): return "[" + items.map(\.description).joined(separator: ",") + "]"
        case .object(let members): return "{" + members.keys.sorted().map { JSONWriter.string($0) + ":" + members[$0]!.description }.joined(separator: ",") + "}"
        }
    }
}

public enum RuleLoader {
    /// Loads and validates every organization's rule for `scenario`. Organizations whose settings are
    /// invalid come back in `invalid` (the run goes on for the others and exits 78 at the end).
    /// `proposing`: settings (a JSON object) merged over each rule, as `rules --dry-run --set` asks, in memory.
    public static func load<S: Scenario>(_ scenario: S, only organizations: [UUID], from connection: Connection, proposing: String? = nil)
        throws -> (rules: [OrganizationRule<S.Settings>], invalid: [JobFailure])
    {
        let known = try connection.query("SELECT 1 FROM scenario_defaults WHERE scenario = \(scenario.key)")
        guard known.count == 1 else {
            throw JobFailure(.config, "scenario_defaults has no row for \"\(scenario.key)\": run \(Schema.migrateCommand)")
        }
        let templates = try MessageTemplateLoader.load(scenario: scenario.key, from: connection)
        let filter: PostgresArray<UUID>? = organizations.isEmpty ? nil : PostgresArray(organizations)
        let rows = try connection.query("""
            SELECT o.id, o.name, coalesce(r.enabled, d.enabled), (d.settings || coalesce(r.settings, '{}') || coalesce(\(proposing)::jsonb, '{}'))::text,
                   o.default_locale, o.time_zone, coalesce(r.priority, d.priority),
                   EXISTS (SELECT FROM time_zone_names z WHERE z.name = o.time_zone),
                   CASE WHEN jsonb_typeof(coalesce(r.settings, '{}') || coalesce(\(proposing)::jsonb, '{}')) = 'object'
                        THEN ARRAY(SELECT jsonb_object_keys(coalesce(r.settings, '{}') || coalesce(\(proposing)::jsonb, '{}'))) END
              FROM organizations o
              JOIN scenario_defaults d ON d.scenario = \(scenario.key)
              LEFT JOIN organization_scenario_rules r ON r.organization_id = o.id AND r.scenario = d.scenario
             WHERE \(filter)::uuid[] IS NULL OR o.id = ANY(\(filter)::uuid[])
             ORDER BY o.name, o.id
            """)
        var rules: [OrganizationRule<S.Settings>] = []
        var invalid: [JobFailure] = []
        var seen = Set<UUID>()
        for row in rows {
            let id: UUID = try row.decode(0)
            let name: String = try row.decode(1)
            seen.insert(id)
            let organization = "organization \"\(name)\" (\(id.lowercasedString))"
            do {
                // Rows written before migration 0009 were not checked: one that cannot be read (a number past
                // what a Double holds, nesting too deep) passes over this organization, like invalid settings.
                let json: JSONValue = try row.decode(3)
                let tree: JSONTree
                do { tree = try JSONTree(json: json.text) } catch {
                    throw JobFailure(.config, "\(organization): \(scenario.key) settings cannot be read (\(error)); fix its row in organization_scenario_rules")
                }
                guard case .object(let values) = tree else {
                    throw JobFailure(.config, "\(organization): \(scenario.key) settings are not a JSON object; fix its row in organization_scenario_rules")
                }
                if let problem = templates.problems[id] {
                    throw JobFailure(.config, "\(organization): \(problem); fix its row in message_templates")
                }
                let reader = SettingsReader(scenario: scenario.key, organizationName: name, organizationID: id, values: values,
                                            ownKeys: Set(try row.decode(8, as: [String]?.self) ?? []))
                let settings = try scenario.settings(reader)
                try reader.checkNoUnknownKeys()
                let messages = templates.templates(for: id)
                let locale: String = try row.decode(4)
                let zone: String = try row.decode(5)
                // Held by `time_zone_names` (what the queries' local days use) and known to Foundation: see `Recipient`.
                guard try row.decode(7, as: Bool.self) && LocalClock.isKnown(zone) else {
                    throw JobFailure(.config, "\(organization): time_zone \(zone.debugDescription) is not a known time zone; fix its row in organizations (an IANA name such as Europe/Oslo)")
                }
                rules.append(OrganizationRule(organizationID: id, organizationName: name, enabled: try row.decode(2), settings: settings,
                                              defaultLocale: locale, timeZone: zone, priority: try row.decode(6),
                                              messages: messages,
                                              defaultLanguage: Language.resolve(nil, organizationDefault: locale, available: messages.languages)))
            } catch let failure as JobFailure {
                invalid.append(failure)
            }
        }
        if let missing = organizations.first(where: { !seen.contains($0) }) {
            throw JobFailure(.usage, "--org \(missing.lowercasedString): no such organization")
        }
        return (rules, invalid)
    }
}
