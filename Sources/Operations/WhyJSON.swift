import Foundation
import Postgres
import TextCoding

/// `why --format json`: the same facts as the text, as one JSON object on one line (arrays of decisions,
/// notifications with their deliveries and events, devices, rules), for tools.
public enum WhyJSON {
    public static func render(_ report: WhyReport) -> String {
        var json = JSONWriter()
        let user = report.user
        var u = JSONWriter()
        u.add("id", user.id.lowercasedString)
        u.add("name", user.name)
        u.add("role", user.role)
        u.add("organization_id", user.organizationID.lowercasedString)
        u.add("organization", user.organizationName)
        u.add("locale", user.locale ?? user.organizationLocale)
        u.add("time_zone", user.timeZone ?? user.organizationTimeZone)
        if !user.timeZoneKnown || !user.organizationTimeZoneKnown {
            u.add("time_zone_known", user.timeZone == nil ? user.organizationTimeZoneKnown : user.timeZoneKnown) // of the zone shown
            if !user.organizationTimeZoneKnown { u.add("organization_time_zone_known", false) }
        }
        u.add("joined_at", date: user.joinedAt)
        u.add("deactivated_at", date: user.deactivatedAt)
        u.add("last_activity_logged_at", date: user.lastActivityAt)
        json.add("user", object: u)

        var filter = JSONWriter()
        filter.add("scenario", report.scenario)
        filter.add("since", date: report.since)
        json.add("filter", object: filter)

        var p = JSONWriter()
        if let preferences = report.preferences {
            p.add("row", true)
            p.add("enabled", preferences.enabled)
            var categories = JSONWriter()
            for (name, on) in preferences.categories { categories.add(name, on) }
            p.add("categories", object: categories)
            p.add("categories_off", strings: preferences.categoriesOff)
            p.add("updated_at", date: preferences.updatedAt)
        } else {
            p.add("row", false)
            p.add("enabled", true)
            p.add("categories_off", strings: [])
            p.add("note", "no row: everything on")
        }
        json.add("preferences", object: p)

        let policy = report.deliveryPolicy
        var d = JSONWriter()
        d.add("quiet_hours", object: policy.quietHours.map { quiet in
            var q = JSONWriter()
            q.add("start", quiet.start)
            q.add("end", quiet.end)
            q.add("source", quiet.own ? "user" : "organization")
            q.add("time_zone", policy.timeZone)
            return q
        })
        d.add("daily_cap", object: policy.dailyCap.map { cap in
            var c = JSONWriter()
            c.add("cap", cap.cap)
            c.add("source", cap.own ? "user" : "organization")
            return c
        })
        d.add("critical_categories", strings: policy.criticalCategories)
        d.add("channels", objects: policy.channels.map { channel in
            var c = JSONWriter()
            c.add("category", channel.category)
            c.add("default", channel.categoryDefault)
            c.add("organization", channel.organization)
            c.add("user", channel.user)
            return c
        })
        json.add("delivery_policy", object: d)

        json.add("rules", objects: report.rules.map { rule in
            var r = JSONWriter()
            r.add("scenario", rule.scenario)
            r.add("enabled", rule.enabled)
            r.add("settings", json: rule.settings)
            r.add("source", rule.organizationRow == nil ? "defaults" : "organization")
            r.add("problem", rule.problem)
            if let own = rule.organizationRow {
                var o = JSONWriter()
                if let enabled = own.enabled { o.add("enabled", enabled) } else { o.add("enabled", nil as String?) }
                o.add("settings", json: own.settings)
                o.add("updated_at", date: own.updatedAt)
                r.add("organization_row", object: o)
            }
            return r
        })

        json.add("devices", objects: report.devices.map { device in
            var d = JSONWriter()
            d.add("id", device.id)
            d.add("provider", device.provider)
            d.add("token", device.token)
            d.add("environment", device.environment)
            d.add("app_id", device.appID)
            d.add("state", device.retiredAt == nil ? "active" : "retired")
            d.add("registered_at", date: device.registeredAt)
            d.add("last_seen_at", date: device.lastSeenAt)
            d.add("retired_at", date: device.retiredAt)
            d.add("retired_reason", device.retiredReason)
            return d
        })

        json.add("decisions", objects: report.decisions.map { decision in
            var d = JSONWriter()
            d.add("id", decision.id)
            d.add("job_run_id", decision.runID)
            d.add("job", decision.job)
            d.add("scenario", decision.scenario)
            d.add("outcome", decision.outcome)
            d.add("reason", decision.reason)
            d.add("detail", decision.detail)
            d.add("subject", decision.subject)
            d.add("notification_id", decision.notificationID?.lowercasedString)
            d.add("dedupe_key", decision.dedupeKey)
            d.add("decided_at", date: decision.decidedAt)
            return d
        })

        json.add("notifications", objects: report.notifications.map { notification in
            var n = JSONWriter()
            n.add("id", notification.id.lowercasedString)
            n.add("scenario", notification.scenario)
            n.add("category", notification.category)
            n.add("title", notification.title)
            n.add("body", notification.body)
            n.add("data", json: notification.data)
            n.add("created_at", date: notification.createdAt)
            n.add("read_at", date: notification.readAt)
            n.add("deleted_at", date: notification.deletedAt)
            n.add("expires_at", date: notification.expiresAt)
            n.add("dedupe_key", notification.dedupeKey)
            n.add("subject", notification.subject)
            n.add("job_run_id", int: notification.runID)
            if !notification.listed.isEmpty {
                n.add("lists", objects: notification.listed.map { item in
                    var l = JSONWriter()
                    l.add("assignment_id", item.id)
                    l.add("title", item.title)
                    l.add("status", item.status)
                    return l
                })
            }
            n.add("decision_ids", ints: report.decisions(of: notification).map(\.id))
            n.add("deliveries", objects: notification.deliveries.map { delivery in
                var d = JSONWriter()
                d.add("id", delivery.id)
                d.add("device_id", delivery.deviceID)
                d.add("provider", delivery.provider)
                d.add("token", delivery.token)
                d.add("environment", delivery.environment)
                d.add("state", delivery.state)
                d.add("attempts", delivery.attempts)
                d.add("next_attempt_at", date: delivery.nextAttemptAt)
                d.add("claimed_until", date: delivery.claimedUntil)
                if report.isOverdue(delivery) { d.add("overdue", WhyText.overdue(report)) }
                d.add("last_error", delivery.lastError)
                d.add("provider_message_id", delivery.providerMessageID)
                d.add("created_at", date: delivery.createdAt)
                d.add("updated_at", date: delivery.updatedAt)
                d.add("sent_at", date: delivery.sentAt)
                d.add("events", objects: delivery.events.map { event in
                    var e = JSONWriter()
                    e.add("id", event.id)
                    e.add("event", event.event)
                    e.add("attempt", event.attempt)
                    e.add("provider_status", int: event.providerStatus)
                    e.add("detail", event.detail)
                    e.add("at", date: event.at)
                    return e
                })
                return d
            })
            return n
        })
        return json.json
    }
}

extension JSONWriter {
    /// An ISO 8601 instant, or null.
    mutating func add(_ name: String, date: Date?) {
        add(name, date.map(Timestamp.iso8601))
    }

    /// A number, or null.
    mutating func add(_ name: String, int: Int?) {
        if let int { add(name, int) } else { add(name, nil as String?) }
    }

    mutating func add(_ name: String, ints: [Int]) {
        add(name, json: "[" + ints.map(String.init).joined(separator: ",") + "]")
    }

    /// An array of the objects other writers built.
    mutating func add(_ name: String, objects: [JSONWriter]) {
        add(name, json: "[" + objects.map(\.json).joined(separator: ",") + "]")
    }
}
