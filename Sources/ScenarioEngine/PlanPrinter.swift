import Foundation
import JobKit
import Postgres
import TextCoding

/// Prints a dry run's plan as decisions stream in: one readable block or one JSON object per candidate.
public struct PlanPrinter {
    let format: OutputFormat
    /// Where the plan's lines go: stdout for the executables, a buffer for in-process tests.
    var emit: (String) -> Void = Output.line

    func header(job: String, asOf: Date) {
        planned.lateAt = CatchUp.lateAt(asOf: asOf)
        guard format == .text else { return }
        emit("\(job) --dry-run as of \(Timestamp.iso8601(asOf)): the plan; nothing is written or sent.")
        emit("")
    }

    /// What the plan has given so far, as the run's recording would: a daily slot taken by one push of the run
    /// is not free for the next one of the same user and day (the plan said "daily slot 1 of 1" for both, the
    /// run capped the second), and a second candidate of one notification is the one already notified.
    private let planned = Planned()

    final class Planned {
        var given = Given()
        /// When a catch-up run's pushes will go (the run's real time), nil for a run as of now.
        var lateAt: Date?
    }

    /// The daily slots and notifications the plan has given so far.
    struct Given {
        var slots: [String: Int] = [:]
        var keys: Set<String> = []
    }

    /// What the plan has given so far: `takeBack(to:)` returns to it when a part of the plan is rolled back and made
    /// again (event-notify's plan made event by event after a scenario's query failed on an unreadable row).
    var given: Given { planned.given }

    func takeBack(to given: Given) { planned.given = given }

    /// Prints one decision as the run would record it; returns the daily slot its push needs, if it needs one (the
    /// caller counts, as the run would allocate them, the pushes over the cap: the dry run's summary said none).
    @discardableResult
    func print(_ recipient: Recipient, organization: String, subject: String?, decision: Decision) -> DailySlot? {
        var decision = decision
        var needs: DailySlot?
        if case .notify(var draft) = decision {
            if !planned.given.keys.insert(draft.dedupeKey).inserted {
                decision = .suppress(.alreadyNotified, detail: draft.sameAsAnother)
            } else if draft.inboxOnly == nil, recipient.activeDevices > 0 {
                if let slot = draft.dailySlot, let taken = slot.takenWhenPlanned {
                    let key = "\(recipient.userID) \(slot.localDay)"
                    let now = taken + planned.given.slots[key, default: 0]
                    if now < slot.cap { planned.given.slots[key, default: 0] += 1 }
                    draft.dailySlot?.takenWhenPlanned = now
                }
                needs = draft.dailySlot
                // A catch-up run decides as of then, but its pushes go now, late, and wait out the recipient's quiet
                // hours of the real time (push-deliver's rule for a late push): said here too.
                if draft.deliverAt == nil, !draft.critical, let lateAt = planned.lateAt {
                    let goes = CatchUp.goes(at: lateAt, quietHours: recipient.quietHours, zone: recipient.timeZone)
                    if goes > lateAt { draft.deliverAt = goes }
                }
                decision = .notify(draft)
            }
        }
        switch format {
        case .text: printText(recipient, organization: organization, subject: subject, decision: decision)
        case .json: emit(json(recipient, organization: organization, subject: subject, decision: decision))
        }
        return needs
    }

    /// An organization left out of this run because it is not due yet.
    func notDue(_ organization: String, id: UUID, why: String) {
        switch format {
        case .text:
            emit("LATER   \(OutsideText.printable(organization)) (organization \(id.lowercasedString)): \(why)")
        case .json:
            var writer = JSONWriter()
            writer.add("organization_id", id.lowercasedString)
            writer.add("organization", organization)
            writer.add("decision", "not_due")
            writer.add("detail", why)
            emit(writer.json)
        }
    }

    /// An organization whose rules the job refuses: none of its people are decided (exit 78).
    func skipped(_ failure: String) {
        switch format {
        case .text:
            emit("SKIPPED \(OutsideText.printable(failure)) (none of its people are decided)")
        case .json:
            var writer = JSONWriter()
            writer.add("decision", "organization_skipped")
            writer.add("detail", failure)
            emit(writer.json)
        }
    }

    func footer(_ summary: ScenarioSummary) {
        guard format == .text else { return }
        emit("")
        emit(summary.sentence)
    }

    private func printText(_ recipient: Recipient, organization: String, subject: String?, decision: Decision) {
        var who = "\(OutsideText.printable(recipient.displayName)) (user \(recipient.userID.lowercasedString), \(OutsideText.printable(organization)))"
        if let subject, !subject.hasPrefix("stretch:") { who += " about \(OutsideText.printable(subject))" }
        switch decision {
        case .notify(let draft):
            let devices = recipient.activeDevices == 0 ? "no device: inbox only" : recipient.activeDevices == 1 ? "1 device" : "\(recipient.activeDevices) devices"
            var push = ""
            if let inboxOnly = draft.inboxOnly { push = "; \(OutsideText.printable(inboxOnly.detail))" }
            else if let deliverAt = draft.deliverAt, recipient.activeDevices > 0 { push = "; DEFER the push until \(Timestamp.iso8601(deliverAt)) (quiet hours)" }
            if draft.inboxOnly == nil, recipient.activeDevices > 0, let slot = draft.dailySlot {
                push += slot.takenWhenPlanned.map { $0 >= slot.cap
                    ? "; daily cap \(slot.cap) reached (\($0) today): CAPPED, inbox only, unless a waiting push of lower priority than \(slot.priority) gives up its slot"
                    : "; daily slot \($0 + 1) of \(slot.cap)" } ?? "; counts against the daily cap of \(slot.cap) on \(slot.localDay)"
            }
            if !draft.inInbox && PlanPrinter.pushes(draft, recipient) { push += "; push only: not listed in the inbox" }
            if draft.critical { push += "; critical: time-sensitive" }
            emit("NOTIFY  \(who): \(OutsideText.printable(draft.why)); \(devices)\(push)")
            emit("        [\(recipient.language.rawValue)] \(OutsideText.printable(draft.title)) | \(OutsideText.printable(draft.body))")
            emit("        data \(draft.dataJSON)  key \(draft.dedupeKey)")
        case .suppress(let reason, let detail):
            emit("SKIP    \(who): \(reason.rawValue): \(OutsideText.printable(detail))")
        }
    }

    /// Whether the run will push `draft`: as the recorder has it, a notification it does not push (no device,
    /// inbox only by a policy, capped) is listed in the inbox whatever its channels said.
    static func pushes(_ draft: NotificationDraft, _ recipient: Recipient) -> Bool {
        guard draft.inboxOnly == nil, recipient.activeDevices > 0 else { return false }
        if let slot = draft.dailySlot, let taken = slot.takenWhenPlanned, taken >= slot.cap { return false }
        return true
    }

    private func json(_ recipient: Recipient, organization: String, subject: String?, decision: Decision) -> String {
        var writer = JSONWriter()
        writer.add("user_id", recipient.userID.lowercasedString)
        writer.add("name", recipient.displayName)
        writer.add("organization_id", recipient.organizationID.lowercasedString)
        writer.add("organization", organization)
        writer.add("language", recipient.language.rawValue)
        writer.add("subject", subject)
        switch decision {
        case .notify(let draft):
            writer.add("decision", "notify")
            writer.add("why", draft.why)
            writer.add("title", draft.title)
            writer.add("body", draft.body)
            writer.add("data", json: draft.dataJSON)
            writer.add("dedupe_key", draft.dedupeKey)
            writer.add("devices", recipient.activeDevices)
            if let deliverAt = draft.deliverAt, draft.inboxOnly == nil { writer.add("deliver_at", Timestamp.iso8601(deliverAt)) }
            if let inboxOnly = draft.inboxOnly { writer.add("inbox_only", inboxOnly.reason) }
            if draft.inboxOnly == nil, recipient.activeDevices > 0, let slot = draft.dailySlot {
                writer.add("daily_cap", slot.cap)
                if let taken = slot.takenWhenPlanned { writer.add("daily_slots_taken", taken) }
                if let taken = slot.takenWhenPlanned, taken >= slot.cap { writer.add("capped", true) }
            }
            if !draft.inInbox && PlanPrinter.pushes(draft, recipient) { writer.add("in_inbox", false) }
            if draft.critical { writer.add("critical", true) }
        case .suppress(let reason, let detail):
            writer.add("decision", "suppress")
            writer.add("reason", reason.rawValue)
            writer.add("detail", detail)
        }
        return writer.json
    }

}
