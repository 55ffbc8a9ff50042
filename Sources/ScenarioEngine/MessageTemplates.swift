import Foundation
import JobKit
import Mustache
import Postgres
import TextCoding

/// A scenario's message templates for one organization: per language a title and a body, the
/// organization's own where it has one, else the shipped default (`message_templates`). Rendered with
/// swift-mustache as text: a value is inserted as it is, never parsed as template syntax, and the push
/// payload builders JSON-encode it and keep the payload within the providers' limits.
public struct MessageTemplates: Sendable {
    public struct Pair: Sendable {
        public var title: MustacheTemplate
        public var body: MustacheTemplate
        /// The text of a template without a tag, which renders as itself: no renderer needed.
        var constantTitle: String?
        var constantBody: String?
        /// Both texts, to tell which variables they name.
        let source: String

        init(title: String, body: String, variables: [TemplateVariable]) throws {
            source = title + "\n" + body
            self.title = try TemplateCheck.checked(title, variables: variables, part: "title")
            self.body = try TemplateCheck.checked(body, variables: variables, part: "body")
            constantTitle = title.contains("{{") ? nil : title
            constantBody = body.contains("{{") ? nil : body
        }
    }
    public private(set) var byLanguage: [String: Pair]
    /// The shipped defaults, for a message an organization's own template knows nothing of.
    let defaults: [String: Pair]
    /// The languages there are templates for.
    public let languages: Set<String>

    init(_ byLanguage: [String: Pair], defaults: [String: Pair] = [:]) {
        self.byLanguage = byLanguage
        self.defaults = defaults
        languages = Set(byLanguage.keys)
    }

    /// The title and body in `language` (else Bokmål, else any), with `values`. An organization's own template
    /// that says nothing with these values (`{{title}}` alone, and an assignment titled with spaces: the check
    /// when it was saved filled in sample values) gives way to the shipped default: a blank push and inbox row
    /// tell the user nothing.
    public func render(_ language: Language, _ values: [String: Any]) -> (title: String, body: String) {
        let key: String? = byLanguage[language.rawValue] != nil ? language.rawValue : byLanguage["nb"] != nil ? "nb" : byLanguage.keys.first
        guard let key, let pair = byLanguage[key] else { return ("", "") }
        let rendered = render(pair, values)
        guard Self.isBlank(rendered.title) || Self.isBlank(rendered.body),
              let fallback = defaults[key] ?? defaults["nb"], fallback.source != pair.source else { return rendered }
        return render(fallback, values)
    }

    static func isBlank(_ text: String) -> Bool { text.allSatisfy(\.isWhitespace) }

    /// The same, for a message only a template that names the flag `flag` can say (one added to the scenario
    /// after an organization wrote its own): the default where the organization's does not name it.
    /// `ownBypassed`: the organization has its own template in that language, and the default was used instead.
    public func render(_ language: Language, _ values: [String: Any], naming flag: String) -> (title: String, body: String, ownBypassed: Bool) {
        let key: String? = byLanguage[language.rawValue] != nil ? language.rawValue : byLanguage["nb"] != nil ? "nb" : byLanguage.keys.first
        guard let key, let pair = byLanguage[key] else { return ("", "", false) }
        let names = pair.source.contains("{{#\(flag)}}") || pair.source.contains("{{^\(flag)}}")
        let used = names ? pair : defaults[key] ?? defaults["nb"] ?? pair
        var (title, body) = render(used, values)
        if Self.isBlank(title) || Self.isBlank(body), let fallback = defaults[key] ?? defaults["nb"], fallback.source != used.source {
            (title, body) = render(fallback, values)
        }
        return (title, body, used.source != pair.source)
    }

    private func render(_ pair: Pair, _ values: [String: Any]) -> (title: String, body: String) {
        let context = TemplateValues(values)
        return (pair.constantTitle ?? pair.title.render(context), pair.constantBody ?? pair.body.render(context))
    }

    /// Parses one template text as plain text (no HTML escaping).
    public static func compile(_ text: String) throws -> MustacheTemplate {
        try MustacheTemplate(string: textPragma + text)
    }

    static let textPragma = "{{% CONTENT_TYPE: TEXT}}"
}

/// A template's values as the renderer reads them: texts and numbers as `TemplateText`, which it renders
/// as they are without trying its other protocols first (a `[String: Any]` of `String`s costs a dozen
/// dynamic casts a variable), flags as `Bool`, lists as arrays of `TemplateValues`.
struct TemplateValues: MustacheParent {
    let values: [String: Any]

    init(_ values: [String: Any]) {
        var converted: [String: Any] = [:]
        converted.reserveCapacity(values.count)
        for (name, value) in values {
            switch value {
            case let text as String: converted[name] = TemplateText(renderText: TemplateText.trimmed(OutsideText.flattened(text)))
            case let number as Int: converted[name] = TemplateText(renderText: String(number))
            case let items as [[String: Any]]: converted[name] = items.map(TemplateValues.init)
            default: converted[name] = value
            }
        }
        self.values = converted
    }

    func child(named name: String) -> Any? { values[name] }
}

/// `{{.}}` names no variable: it renders nothing (else Swift's description of the values), and the
/// template check refuses it.
extension TemplateValues: MustacheCustomRenderable {
    var renderText: String { "" }
    var isNull: Bool { false }
}

/// A value rendered as its text, without the spaces around it. An empty text is false to a section, so a
/// template can leave out what goes with it: `Hi{{#name}} {{name}}{{/name}}!` is "Hi!" for a user whose
/// name is empty ("Hi !" before).
struct TemplateText: MustacheCustomRenderable {
    let renderText: String
    var isNull: Bool { renderText.isEmpty }

    static func trimmed(_ text: String) -> String {
        guard let first = text.unicodeScalars.first, let last = text.unicodeScalars.last,
              first.properties.isWhitespace || last.properties.isWhitespace else { return text }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// How a message names someone other than its recipient (a mentor, in a coordinator's message) whose name is
/// empty: said as having none, rather than a sentence that starts with a blank.
public enum UnnamedPerson {
    public static func shown(_ name: String, in language: Language) -> String {
        guard isUnnamed(name) else { return name }
        return language == .norwegianBokmal ? "(uten navn)" : "(no name)"
    }

    /// Whether `name` is empty once the spaces around it are left out (a template renders it as nothing).
    public static func isUnnamed(_ name: String) -> Bool { TemplateText.trimmed(OutsideText.flattened(name)).isEmpty }
}

/// Loads the templates of a scenario: the defaults, and each organization's overrides.
enum MessageTemplateLoader {
    struct Loaded {
        var defaults: [String: MessageTemplates.Pair]
        var overrides: [UUID: [String: MessageTemplates.Pair]]
        /// Organizations whose own templates do not parse or name unknown variables.
        var problems: [UUID: String]
        var variables: [TemplateVariable]

        func templates(for organization: UUID) -> MessageTemplates {
            MessageTemplates(defaults.merging(overrides[organization] ?? [:]) { _, own in own }, defaults: defaults)
        }
    }

    static func load(scenario: String, from connection: Connection) throws -> Loaded {
        let variables = try TemplateVariable.load(scenario: scenario, from: connection)
        let rows = try connection.query("""
            SELECT language, organization_id, title, body FROM message_templates WHERE scenario = \(scenario) ORDER BY organization_id NULLS FIRST, language
            """)
        var loaded = Loaded(defaults: [:], overrides: [:], problems: [:], variables: variables)
        for row in rows {
            let language: String = try row.decode(0)
            let organization = try row.decode(1, as: UUID?.self)
            let title: String = try row.decode(2), body: String = try row.decode(3)
            do {
                let pair = try CheckedPairs.shared.pair(row: "\(scenario)/\(organization?.lowercasedString ?? "default")/\(language)",
                                                        title: title, body: body, variables: variables)
                if let organization { loaded.overrides[organization, default: [:]][language] = pair } else { loaded.defaults[language] = pair }
            } catch let problem as TemplateCheck.Problem {
                let location = "message template \(scenario)/\(language)\(organization == nil ? " (the default)" : ""): \(problem.message)"
                guard let organization else { throw JobFailure(.config, location + "; fix its row in message_templates") }
                loaded.problems[organization] = location
            }
        }
        guard !loaded.defaults.isEmpty else {
            throw JobFailure(.config, "message_templates has no default template for \(scenario): run \(Schema.migrateCommand)")
        }
        return loaded
    }
}

/// Template pairs already checked, by their row (scenario, organization, language) with the texts and variables
/// they were checked with: every batch of every job loads its scenario's templates, and checking them (parsing,
/// then rendering with every flag on and off) took a third of event-notify's CPU, several milliseconds a batch of
/// one or two pauses (perf, stop 32). A row whose text or variables changed is checked afresh and replaces what was
/// remembered, so the memory is bounded by the table; a text found wrong is remembered as wrong.
final class CheckedPairs: @unchecked Sendable {
    static let shared = CheckedPairs()
    private let lock = NSLock()
    private var checked: [String: (texts: String, result: Result<MessageTemplates.Pair, TemplateCheck.Problem>)] = [:]

    func pair(row: String, title: String, body: String, variables: [TemplateVariable]) throws -> MessageTemplates.Pair {
        let texts = ([title, body] + variables.map { "\($0.name):\($0.kind.rawValue)" }).joined(separator: "\u{0}")
        if let known = lock.withLock({ checked[row] }), known.texts == texts { return try known.result.get() }
        let result: Result<MessageTemplates.Pair, TemplateCheck.Problem>
        do {
            result = .success(try MessageTemplates.Pair(title: title, body: body, variables: variables))
        } catch let problem as TemplateCheck.Problem {
            result = .failure(problem)
        }
        lock.withLock { checked[row] = (texts, result) }
        return try result.get()
    }
}

/// A variable a scenario's templates may name (`message_template_variables`).
public struct TemplateVariable: Sendable {
    public enum Kind: String, Sendable { case text, number, flag, list, item }
    public var name: String
    public var kind: Kind

    static func load(scenario: String, from connection: Connection) throws -> [TemplateVariable] {
        try connection.query("SELECT name, kind FROM message_template_variables WHERE scenario = \(scenario) ORDER BY name").map {
            TemplateVariable(name: try $0.decode(0), kind: Kind(rawValue: try $0.decode(1)) ?? .text)
        }
    }
}

/// Checks a template with the renderer itself: it parses, rendering it with sample values (every flag on,
/// then every flag off and every optional value absent) names only the scenario's variables, and with every
/// value there it says something, flags on and off.
public enum TemplateCheck {
    public struct Problem: Error {
        public var message: String
    }

    public static func checked(_ text: String, variables: [TemplateVariable], part: String) throws -> MustacheTemplate {
        let template: MustacheTemplate
        do {
            template = try MessageTemplates.compile(text)
        } catch let error as MustacheTemplate.ParserError {
            let column = error.context.columnNumber - (error.context.lineNumber == 1 ? MessageTemplates.textPragma.count : 0)
            throw Problem(message: "\(part): does not parse (\(error.error) at line \(error.context.lineNumber), column \(column))")
        } catch {
            throw Problem(message: "\(part): does not parse (\(error))")
        }
        // Before any render: a section nested in itself renders the list again for every item, at every level.
        if let nested = selfNestedSection(in: text) {
            throw Problem(message: "\(part): {{\(nested)}} inside {{#\(nested.dropFirst())}}: a section may not be nested in itself")
        }
        let known = Set(variables.map(\.name))
        for present in [true, false] {
            let probe = Probe(sample(variables, present: present))
            _ = template.render(probe)
            if let unknown = probe.allAsked.subtracting(known).sorted().first {
                throw Problem(message: "\(part): {{\(unknown)}} is not a variable (its variables: \(known.sorted().joined(separator: ", ")))")
            }
        }
        // Every value there, every flag on, then off: a text that still says nothing (all of it in sections) sent
        // blank pushes and inbox rows.
        for flags in [true, false] {
            let rendered = template.render(Probe(sample(variables, present: true, flags: flags)))
            if rendered.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                guard text.contains("{{") else { throw Problem(message: "\(part): is blank") }
                throw Problem(message: "\(part): says nothing with every flag \(flags ? "on" : "off") (what it says is all in sections)")
            }
        }
        return template
    }

    /// The first section tag (`#name` or `^name`) inside an open section of the same name, if any.
    static func selfNestedSection(in text: String) -> String? {
        var open: [Substring] = []
        var rest = text[...]
        while let start = rest.range(of: "{{"), let end = rest[start.upperBound...].range(of: "}}") {
            let tag = rest[start.upperBound..<end.lowerBound].trimmingCharacters(in: .whitespaces)
            rest = rest[end.upperBound...]
            guard let sigil = tag.first else { continue }
            let name = tag.dropFirst().trimmingCharacters(in: .whitespaces)[...]
            switch sigil {
            case "#", "^":
                if open.contains(name) { return "\(sigil)\(name)" }
                open.append(name)
            case "/":
                if let index = open.lastIndex(of: name) { open.removeSubrange(index...) }
            default:
                break
            }
        }
        return nil
    }

    /// Sample values: texts, numbers, flags, and a list of two items for a list variable.
    static func sample(_ variables: [TemplateVariable], present: Bool, flags: Bool? = nil) -> [String: Any] {
        let flags = flags ?? present
        var values: [String: Any] = [:]
        let items = variables.filter { $0.kind == .item }
        for variable in variables {
            switch variable.kind {
            case .text: if present { values[variable.name] = "sample" }
            case .number: if present { values[variable.name] = 2 }
            case .flag: values[variable.name] = flags
            case .item: break
            case .list:
                values[variable.name] = (0..<2).map { index -> Probe in
                    var item: [String: Any] = [:]
                    for flag in items { item[flag.name] = (index == 0) == flags }
                    return Probe(item)
                }
            }
        }
        return values
    }

    /// A context that notes every name the template asks for.
    final class Probe: MustacheParent {
        let values: [String: Any]
        private(set) var asked = Set<String>()
        private var children: [Probe] = []

        init(_ values: [String: Any]) {
            self.values = values
            for case let list as [Probe] in values.values { children += list }
        }

        func child(named name: String) -> Any? {
            asked.insert(name)
            return values[name]
        }

        var allAsked: Set<String> { children.reduce(asked) { $0.union($1.allAsked) } }
    }
}

/// The probe notes `{{.}}` as a name asked for, so the check refuses it as no variable.
extension TemplateCheck.Probe: MustacheCustomRenderable {
    var renderText: String {
        asked.insert(".")
        return ""
    }
    var isNull: Bool { false }
}
