import FakePush
import Foundation
import Postgres
import Testing
import TestSupport

/// A category the organization marks critical: through the user's category switch (not the master
/// switch), through quiet hours, and time-sensitive on the phone.
@Suite struct CriticalCategoryTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
        // Inactivity is critical here, and the night is quiet all day long (a window around now).
        try f.connection.execute("""
            INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end, critical_categories)
            VALUES (\(org), ((now() AT TIME ZONE 'Europe/Oslo') - interval '1 hour')::time(0),
                    ((now() AT TIME ZONE 'Europe/Oslo') + interval '2 hours')::time(0), '{inactivity}')
            """)
    }

    @Test func theCategorySwitchCannotSilenceItButTheMasterSwitchStillRules() throws {
        let switchedOff = try f.mentor(org, "Category off", lastActivityDaysAgo: 20)
        try f.categoryOff(switchedOff, "inactivity")
        let masterOff = try f.mentor(org, "Master off", lastActivityDaysAgo: 20)
        try f.preferences(masterOff, master: false)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.decisions(switchedOff) == ["notified:notified"])
        #expect(try f.decisions(masterOff) == ["suppressed:push_disabled"])
    }

    @Test func itGoesThroughQuietHoursAndIsTimeSensitiveOnThePhone() throws {
        let push = try PushEnvironment()
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 2)
        let result = try Jobs.inactivityCheck(db, now: f.now, environment: push.variables)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try f.deliveryStates(kari) == ["sent", "sent"], "not held by quiet hours")
        let apns = try #require(push.server.requests().first { $0.provider == .apns })
        let aps = (apns.json as? [String: Any])?["aps"] as? [String: Any]
        #expect(aps?["interruption-level"] as? String == "time-sensitive")
        let fcm = try #require(push.server.requests().first { $0.provider == .fcm })
        let android = ((fcm.json as? [String: Any])?["message"] as? [String: Any])?["android"] as? [String: Any]
        let notification = android?["notification"] as? [String: Any]
        #expect(notification?["channel_id"] as? String == "inactivity_critical")
        #expect(notification?["notification_priority"] as? String == "PRIORITY_MAX")
        #expect(android?["priority"] as? String == "HIGH")
        // An iPhone registered through FCM gets it through APNs as time-sensitive too, with the collapse id and badge
        // of our own APNs requests (FCM's requests carried no `apns` block: none of it reached such a phone).
        let viaFCM = ((fcm.json as? [String: Any])?["message"] as? [String: Any])?["apns"] as? [String: Any]
        let headers = viaFCM?["headers"] as? [String: Any]
        let fcmAPS = (viaFCM?["payload"] as? [String: Any])?["aps"] as? [String: Any]
        #expect(fcmAPS?["interruption-level"] as? String == "time-sensitive", "\(String(describing: viaFCM))")
        #expect(headers?["apns-collapse-id"] as? String == apns.header("apns-collapse-id"), "\(String(describing: headers))")
        #expect(headers?["apns-priority"] as? String == "10" && fcmAPS?["badge"] as? Int == aps?["badge"] as? Int)
    }

    @Test func aCategoryNotMarkedCriticalWaitsForQuietHours() throws {
        try f.connection.execute("UPDATE organization_delivery_policies SET critical_categories = '{new_assignment}'")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.decisions(kari) == ["notified:deferred_quiet_hours"])
    }
}
