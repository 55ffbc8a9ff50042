import Foundation
import Postgres
import TextCoding

/// `why`'s text form, for a person at 3 a.m.: the user, their preferences, the organization's rules, their
/// devices, then each notification under the decision that made it with its deliveries and their events
/// in order, then the decisions that led to no notification with their reasons.
public enum WhyText {
    public static func render(_ report: WhyReport) -> String {
        var out = ""
        // Names, titles, bodies and reasons are outside text: control and bidi characters are shown escaped, so
        // a pause reason with an escape sequence in it cannot clear or rewrite the operator's screen.
        func line(_ text: String = "") { out += OutsideText.printable(text) + "\n" }
        let user = report.user

        line("why \(user.id.lowercasedString): \(user.name), \(user.role) in \(JSONWriter.string(user.organizationName)) (organization \(user.organizationID.lowercasedString))")
        line("  language \(user.locale ?? user.organizationLocale)\(user.locale == nil ? " (the organization's default)" : ""), time zone \(user.timeZone ?? user.organizationTimeZone)\(user.timeZone == nil ? " (the organization's)" : "")")
        // A zone the jobs do not know (a row written before 0016): what they do instead, as the policy line shows it.
        if !user.organizationTimeZoneKnown {
            line("  UNKNOWN TIME ZONE \(user.organizationTimeZone) of the organization: the scheduled jobs skip the organization (exit 78) and event-notify sets its events aside; fix organizations.time_zone (an IANA name such as Europe/Oslo)")
        }
        if let zone = user.timeZone, !user.timeZoneKnown, user.organizationTimeZoneKnown { // else the organization is skipped
            line("  UNKNOWN TIME ZONE \(zone): the jobs use \(report.deliveryPolicy.timeZone) instead and exit 65; fix users.time_zone (an IANA name such as Europe/Oslo)")
        }
        line("  joined \(time(user.joinedAt)); last activity logged \(user.lastActivityAt.map(time) ?? "never")")
        if let left = user.deactivatedAt { line("  DEACTIVATED \(time(left)): no scenario considers them any more") }
        line("  showing \(report.scenario.map { "scenario \($0)" } ?? "every scenario"), \(report.since.map { "since \(time($0))" } ?? "all time")")
        line()

        if let preferences = report.preferences {
            let off = preferences.categoriesOff
            line("Preferences (push_notification_configs, updated \(time(preferences.updatedAt))): master switch \(preferences.enabled ? "on" : "OFF: no notification of any category, neither push nor inbox row")\(off.isEmpty ? "; every category on" : "; categories OFF: " + off.joined(separator: ", "))")
        } else {
            line("Preferences: no row in push_notification_configs: everything on")
        }
        line()

        let policy = report.deliveryPolicy
        var rules: [String] = []
        if let quiet = policy.quietHours {
            rules.append("quiet hours \(quiet.start)–\(quiet.end) \(policy.timeZone) (\(quiet.own ? "the user's own" : "the organization's"); pushes inside wait for the end; the times below are UTC)")
        } else {
            rules.append("no quiet hours")
        }
        if let cap = policy.dailyCap {
            rules.append("daily cap \(cap.cap) non-critical push\(cap.cap == 1 ? "" : "es") (\(cap.own ? "the user's own" : "the organization's"))")
        } else {
            rules.append("no daily cap")
        }
        if !policy.criticalCategories.isEmpty { rules.append("critical: " + policy.criticalCategories.joined(separator: ", ")) }
        for channel in policy.channels {
            var whose = [channel.organization.map { "the organization's \($0)" } ?? "the category's \(channel.categoryDefault)"]
            if let user = channel.user { whose.append("narrowed by the user's \(user)") }
            rules.append("\(channel.category): " + whose.joined(separator: ", "))
        }
        line("Delivery policy: " + rules.joined(separator: "; "))
        line()

        line("Organization rules in force (scenario_defaults merged with the organization's row):")
        let width = report.rules.map(\.scenario.count).max() ?? 0
        for rule in report.rules {
            var text = "  " + pad(rule.scenario, width) + "  " + (rule.enabled ? "on " : "OFF") + "  " + rule.settings
            if let own = rule.organizationRow {
                text += "  (organization's row, updated \(time(own.updatedAt)): enabled \(own.enabled.map { String($0) } ?? "default"), settings \(own.settings))"
            } else {
                text += "  (defaults)"
            }
            line(text)
            if let problem = rule.problem {
                line("  " + pad("", width) + "  INVALID: \(problem): the jobs skip this organization for \(rule.scenario) (rules --validate)")
            }
        }
        line()

        line("Devices (\(report.devices.count)):")
        if report.devices.isEmpty { line("  none registered: notifications go to the inbox only") }
        for device in report.devices {
            let state = device.retiredAt.map { "RETIRED \(time($0)): \(device.retiredReason ?? "no reason recorded")" } ?? "active"
            line("  device \(device.id) \(device.provider) \(device.token)\(device.environment.map { " (\($0))" } ?? ""), app \(device.appID), registered \(time(device.registeredAt)), last seen \(time(device.lastSeenAt)): \(state)")
        }
        line()

        line("Notifications (\(report.notifications.count)):")
        if report.notifications.isEmpty { line("  none") }
        for notification in report.notifications {
            line("  \(time(notification.createdAt))  \(notification.scenario)  notification \(notification.id.lowercasedString)  \(JSONWriter.string(notification.title))")
            let decisions = report.decisions(of: notification)
            if decisions.isEmpty { line("    decision: none on record (pruned, or outside --since)") }
            for decision in decisions { line("    decision \(decision.id) (run \(decision.runID), \(decision.job)): \(decision.outcome): \(decision.reason)\(decision.detail.map { " — \($0)" } ?? "")") }
            var facts = ["dedupe key \(notification.dedupeKey)"]
            if let subject = notification.subject { facts.append("subject \(subject)") }
            if let route = notification.route { facts.append("tap \(route)") }
            facts.append(notification.readAt.map { "read \(time($0))" } ?? "unread")
            if let deleted = notification.deletedAt { facts.append("deleted by the user \(time(deleted))") }
            if let expires = notification.expiresAt { facts.append("expires \(time(expires))") }
            line("    " + facts.joined(separator: "; "))
            line("    body: \(notification.body)")
            if !notification.listed.isEmpty {
                line("    lists \(notification.listed.count) assignment\(notification.listed.count == 1 ? "" : "s"): "
                     + notification.listed.map { "\($0.title.map(JSONWriter.string) ?? $0.id) (\($0.status))" }.joined(separator: ", "))
            }
            if notification.deliveries.isEmpty {
                // Why no push was queued: the decision says when it was one (inbox only, the daily cap, quiet hours
                // past the expiry); otherwise the user had no active device.
                if let held = decisions.first(where: { $0.reason != "notified" }) {
                    line("    no delivery: \(held.reason) (its decision above)")
                } else {
                    line("    no delivery: no active device when it was stored, or its decision is pruned")
                }
            }
            for delivery in notification.deliveries {
                line("    delivery \(delivery.id) to device \(delivery.deviceID) \(delivery.provider) \(delivery.token)\(delivery.environment.map { " (\($0))" } ?? ""): \(state(delivery, in: report))")
                if report.isOverdue(delivery) { line("      OVERDUE: \(overdue(report))") }
                for event in delivery.events {
                    var text = "      \(time(event.at))  " + pad(event.event, 9) + " attempt \(event.attempt)"
                    if let status = event.providerStatus { text += "  HTTP \(status)" }
                    if let detail = event.detail { text += "  \(detail)" }
                    line(text)
                }
            }
        }
        line()

        let others = report.decisionsWithoutNotification
        line("Decisions that led to no notification (\(others.count)):")
        if others.isEmpty { line("  none") }
        for decision in others {
            var text = "  \(time(decision.decidedAt))  \(decision.scenario)  \(decision.outcome): \(decision.reason)"
            if let detail = decision.detail { text += " — \(detail)" }
            if decision.outcome == "notified" {
                text += decision.notificationID.map { " (notification \($0.lowercasedString), outside this filter)" } ?? " (its inbox row has since been pruned)"
            }
            text += "  [decision \(decision.id), run \(decision.runID) \(decision.job)\(decision.subject.map { ", subject \($0)" } ?? "")]"
            line(text)
        }
        return out
    }

    /// A delivery's state in words, with what happens next.
    static func state(_ delivery: WhyReport.Delivery, in report: WhyReport) -> String {
        let attempts = "\(delivery.attempts) attempt\(delivery.attempts == 1 ? "" : "s")"
        var text: String
        switch delivery.state {
        case "sent": text = "SENT\(delivery.sentAt.map { " " + time($0) } ?? ""), \(attempts)"
        case "pending": text = "PENDING, due \(delivery.nextAttemptAt.map(time) ?? "?"), \(attempts) so far"
        case "retrying": text = "RETRYING at \(delivery.nextAttemptAt.map(time) ?? "?"), \(attempts) so far"
        default:
            text = "\(delivery.state.uppercased()) \(time(delivery.updatedAt)), \(attempts)"
            // A push already on its way when its delivery was cancelled or settled: it went out all the same.
            if let sent = delivery.sentAt { text += ", but the push went out at \(time(sent)) (it was already on its way)" }
        }
        if let lease = delivery.claimedUntil {
            text += report.isClaimed(delivery) ? ", claimed by a push-deliver run until \(time(lease))"
                : ", its claim by a push-deliver run ran out at \(time(lease)) (that run ended without giving it back)"
        }
        if let error = delivery.lastError { text += ", last error: \(error)" }
        if let id = delivery.providerMessageID { text += ", provider message id \(id)" }
        return text
    }

    /// Why a delivery long due may still wait: what the last push-deliver run said.
    static func overdue(_ report: WhyReport) -> String {
        guard let run = report.lastDeliveryRun else {
            return "no push-deliver run is on record: is its timer (or crontab line) installed?"
        }
        let ended = run.outcome == "running" ? "is still running (or died without a word)" : "ended \(run.outcome)"
        return "the last push-deliver run (\(run.id), started \(time(run.startedAt))) \(ended)\(run.error.map { ": \($0)" } ?? "")"
    }

    static func time(_ date: Date) -> String { Timestamp.iso8601(date) }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
