import FakePush
import Foundation
import Postgres
@testable import ScenarioEngine
import Testing
import TestSupport

/// Message texts as data: the shipped defaults, an organization's own, a third language without code;
/// values that can never inject template syntax or break the payload; templates checked when saved.
@Suite struct TemplateTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        // Whole seconds, as the database stores them to the microsecond: "20 days ago" stays 20 days.
        f = try Fixtures(db, now: Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down)))
        org = try f.organization("Org")
    }

    func template(_ language: String, title: String, body: String, organization: UUID? = nil, scenario: String = "inactivity") throws {
        try f.connection.execute("""
            INSERT INTO message_templates (scenario, language, organization_id, title, body)
            VALUES (\(scenario), \(language), \(organization), \(title), \(body))
            """)
    }

    @Test func anOrganizationsOwnTemplateWinsAndAThirdLanguageNeedsNoCode() throws {
        try template("en", title: "Still with us, {{name}}?", body: "{{days}} days without a log.", organization: org)
        try template("se", title: "Leatgo juoga maid registreret?", body: "Bures {{name}}! {{days}} beaivvi.")
        let english = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, locale: "en-GB")
        let sami = try f.mentor(org, "Ánde", lastActivityDaysAgo: 20, locale: "se-NO")
        let other = try f.organization("Other")
        let elsewhere = try f.mentor(other, "Ola", lastActivityDaysAgo: 20, locale: "en")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.inbox(english).map { "\($0.title) | \($0.body)" } == ["Still with us, Kari? | 20 days without a log."])
        #expect(try f.inbox(sami).map { "\($0.title) | \($0.body)" } == ["Leatgo juoga maid registreret? | Bures Ánde! 20 beaivvi."])
        #expect(try f.inbox(elsewhere).first?.title == "Anything to log?", "another organization keeps the default")
    }

    @Test func valuesNeverInjectTemplateSyntaxNorBreakThePayload() throws {
        let push = try PushEnvironment()
        let hostile = "{{#never_active}}X{{/never_active}}{{> partial}}\"}\\\n" + String(repeating: "Å", count: 5000)
        let mentor = try f.mentor(org, hostile, lastActivityDaysAgo: 20, devices: 2)
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let inbox = try #require(try f.inbox(mentor).first)
        // The name as it is, not as template syntax (its line break shown as a space, as any control character).
        let shown = hostile.replacingOccurrences(of: "\n", with: " ")
        #expect(inbox.body.hasPrefix("Hei \(shown)! Det er 20 dager"), "the name as it is, not as template syntax")
        #expect(try f.deliveryStates(mentor) == ["sent", "sent"])
        for request in push.server.requests() where request.provider == .apns {
            #expect(request.body.count <= 4096, "APNs payload within 4 KB")
            let alert = ((request.json as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? [String: Any]
            #expect((alert?["body"] as? String)?.hasPrefix("Hei {{#never_active}}X{{/never_active}}{{> partial}}\"}\\ ") == true)
        }
    }

    /// An organization's template that passed its checks (they fill in sample values) but says nothing with a
    /// row's real ones (`{{title}}` alone, an assignment titled with spaces) sent a blank push and inbox row. The
    /// shipped default says it instead.
    @Test func anOwnTemplateThatSaysNothingForARowGivesWayToTheDefault() throws {
        let push = try PushEnvironment()
        try template("nb", title: "{{title}}", body: "{{title}}", organization: org, scenario: "assignment_follow_up")
        let coordinator = try f.user(org, "Linda", role: "coordinator")
        let blank = try f.mentor(org, "Kari", lastActivityDaysAgo: 1, devices: 1)
        let named = try f.mentor(org, "Ola", lastActivityDaysAgo: 1, devices: 1)
        try f.assignment(org, mentor: blank, coordinator: coordinator, title: " \t ", dispatchedDaysAgo: 12)
        try f.assignment(org, mentor: named, coordinator: coordinator, title: "Ring Per", dispatchedDaysAgo: 12)
        let result = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now)], database: db, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        let shown = try #require(try f.inbox(blank).first)
        #expect(!shown.title.allSatisfy(\.isWhitespace) && !shown.body.allSatisfy(\.isWhitespace), "the default's words: \(shown)")
        #expect(try f.inbox(named).map { "\($0.title) | \($0.body)" } == ["Ring Per | Ring Per"], "the organization's own where it says something")
        for request in push.server.requests() where request.provider == .apns {
            let alert = ((request.json as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? [String: Any]
            #expect((alert?["title"] as? String).map { !$0.allSatisfy(\.isWhitespace) } == true, "\(String(describing: alert))")
        }
    }

    @Test func aTemplateIsCheckedWhenItIsSaved() throws {
        func refused(_ title: String, _ body: String = "x") throws -> String {
            do {
                try template("nn", title: title, body: body, organization: org)
                return "saved"
            } catch let error as PostgresError {
                return error.description
            }
        }
        #expect(try refused("Hei {{nmae}}").contains("title: {{nmae}}: nmae is not a variable of inactivity (its variables: days, name, never_active, one_day)"))
        #expect(try refused("Hei {{.}}").contains("title: {{.}}: . is not a variable of inactivity"))
        #expect(try refused("ok", "{{#never_active}}{{.}}{{/never_active}}").contains("body: {{.}}: . is not a variable of inactivity"))
        #expect(try refused("ok", "{{#never_active}}x").contains("body: {{#never_active}} is not closed"))
        #expect(try refused("{{#never_active}}x{{/name}}").contains("{{/name}} closes {{#never_active}}"))
        #expect(try refused("{{> footer}}").contains("partials, blocks, delimiter changes and pragmas are not allowed"))
        #expect(try refused("Hei {{name").contains("a {{ without its }}"))
        #expect(try refused("ok", "{{#never_active}}{{^never_active}}x{{/never_active}}{{/never_active}}")
            .contains("body: {{^never_active}} inside {{#never_active}}: a section may not be nested in itself"))
        #expect(try refused(String(repeating: "x", count: 600)).contains("message_templates_title_check"))
        #expect(try f.count("message_templates") == 16, "nothing saved")
    }

    /// A text that says nothing was stored and sent: a title of spaces, or one all in sections
    /// (`{{#never_active}}{{/never_active}}`), made pushes and inbox rows with an empty title.
    @Test func aTextThatSaysNothingIsRefused() throws {
        for (title, body, message) in [("   ", "x", "title: is blank"), ("ok", " \n\t", "body: is blank"), ("\u{00A0}\u{3000}", "x", "title: is blank")] {
            do {
                try template("nb", title: title, body: body, organization: org)
                Issue.record("\(title.debugDescription) / \(body.debugDescription) was saved")
            } catch let error as PostgresError {
                #expect(error.description.contains("message template inactivity/nb: \(message)"), "\(error)")
            }
        }
        // All in sections: the database cannot render it; the jobs' check does, for its organization only.
        try template("nb", title: "{{#never_active}}{{/never_active}}", body: "{{^never_active}} {{/never_active}}", organization: org)
        let other = try f.organization("Other")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let ola = try f.mentor(other, "Ola", lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("message template inactivity/nb: title: says nothing with every flag on"), "\(result.stderr)")
        #expect(try f.inbox(kari).isEmpty)
        #expect(try f.inbox(ola).count == 1, "the other organization is notified")
        let validate = try Jobs.run("rules", ["--validate"], database: db)
        #expect(validate.status == 78)
        #expect(validate.stdout.contains("says nothing with every flag"), "\(validate.stdout)")
    }

    @Test func aTemplateSavedBeforeTheCheckIsRefusedByTheJobForItsOrganizationOnly() throws {
        try f.connection.execute("ALTER TABLE message_templates DISABLE TRIGGER message_templates_valid")
        try template("nb", title: "Hei {{#name}}", body: "x", organization: org)
        try f.connection.execute("ALTER TABLE message_templates ENABLE TRIGGER message_templates_valid")
        let other = try f.organization("Other")
        try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let ola = try f.mentor(other, "Ola", lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78)
        #expect(result.stderr.contains("organization \"Org\"") && result.stderr.contains("message template inactivity/nb: title: does not parse"), "\(result.stderr)")
        #expect(try f.inbox(ola).count == 1, "the other organization is notified")
        let validate = try Jobs.run("rules", ["--validate"], database: db)
        #expect(validate.status == 78)
        #expect(validate.stdout.contains("message template inactivity/nb"), "\(validate.stdout)")
    }

    /// The renderer looks a name up through every enclosing section: {{#cases}} nested in itself sixty times
    /// (1,200 characters) is 3^60 renders of the list, which hung overdue-digest for every organization. A row
    /// saved before the database refused it is refused by the job, for its organization only, before any render.
    @Test func aListNestedInItselfSavedBeforeTheCheckIsRefusedWithoutRenderingIt() throws {
        let nested = String(repeating: "{{#cases}}", count: 60) + "x" + String(repeating: "{{/cases}}", count: 60)
        try f.connection.execute("ALTER TABLE message_templates DISABLE TRIGGER message_templates_valid")
        try template("nb", title: "Oppdrag", body: nested, organization: org, scenario: "overdue_digest")
        try f.connection.execute("ALTER TABLE message_templates ENABLE TRIGGER message_templates_valid")
        let result = try Jobs.run("overdue-digest", [], database: db)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("body: {{#cases}} inside {{#cases}}: a section may not be nested in itself"), "\(result.stderr)")
        do {
            try template("nn", title: "Oppdrag", body: nested, organization: org, scenario: "overdue_digest")
            Issue.record("the database saved a list nested in itself")
        } catch let error as PostgresError {
            #expect(error.description.contains("a section may not be nested in itself"), "\(error)")
        }
    }

    /// Outside text in a title or body cannot break its line or make it read backwards on a lock screen:
    /// control characters become spaces, bidirectional controls are dropped. And `{{.}}` (no variable) is
    /// refused by the check and renders nothing, not Swift's description of the values.
    @Test func valuesAreShownPlainAndTheDotIsNoVariable() throws {
        let variables = [TemplateVariable(name: "name", kind: .text), TemplateVariable(name: "never_active", kind: .flag)]
        let template = try TemplateCheck.checked("Hei {{name}}!", variables: variables, part: "title")
        #expect(template.render(TemplateValues(["name": "Kari\n\u{202E}Nordmann\u{1b}[2J"])) == "Hei Kari Nordmann [2J!")
        #expect(throws: TemplateCheck.Problem.self) { try TemplateCheck.checked("Hei {{.}}", variables: variables, part: "body") }
        #expect(throws: TemplateCheck.Problem.self) { try TemplateCheck.checked("{{#never_active}}{{.}}{{/never_active}}", variables: variables, part: "body") }
        let unchecked = try MessageTemplates.compile("Hei {{.}}")
        #expect(unchecked.render(TemplateValues(["name": "Kari"])) == "Hei ")
    }

    /// An empty text (or one of spaces) is false to a section, so the shipped greeting leaves out a name that
    /// is empty: "Hi!", not "Hi !". Spaces around a value are left out.
    @Test func anEmptyTextIsFalseToASection() throws {
        let variables = [TemplateVariable(name: "name", kind: .text)]
        let template = try TemplateCheck.checked("Hi{{#name}} {{name}}{{/name}}!{{^name}} (no name){{/name}}", variables: variables, part: "body")
        #expect(template.render(TemplateValues(["name": ""])) == "Hi! (no name)")
        #expect(template.render(TemplateValues(["name": " \t "])) == "Hi! (no name)")
        #expect(template.render(TemplateValues(["name": " Kari "])) == "Hi Kari!")
        #expect(UnnamedPerson.shown(" ", in: .english) == "(no name)")
        #expect(UnnamedPerson.shown("\n\r", in: .english) == "(no name)", "a line break renders as a space, then nothing")
        #expect(UnnamedPerson.shown("Ola", in: .norwegianBokmal) == "Ola")
    }

    @Test func theRendererFindsAnUnknownNameInASectionEitherWay() throws {
        let variables = [TemplateVariable(name: "name", kind: .text), TemplateVariable(name: "never_active", kind: .flag)]
        #expect(throws: TemplateCheck.Problem.self) { try TemplateCheck.checked("{{^never_active}}{{dayz}}{{/never_active}}", variables: variables, part: "body") }
        #expect(throws: TemplateCheck.Problem.self) { try TemplateCheck.checked("{{#never_active}}{{nam}}{{/never_active}}", variables: variables, part: "body") }
        let template = try TemplateCheck.checked("{{#never_active}}Hei {{name}}{{/never_active}}{{^never_active}}Hallo{{/never_active}}", variables: variables, part: "body")
        #expect(template.render(["name": "<b>&{{x}}", "never_active": true]) == "Hei <b>&{{x}}", "text: no HTML escaping, no re-parsing")
    }
}
