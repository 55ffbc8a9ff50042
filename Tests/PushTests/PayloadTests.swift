import Foundation
import Push
import Testing

/// Payloads as the phone receives them: always valid JSON, never over the provider's limit.
@Suite struct PayloadTests {
    func message(body: String, title: String = "Har du noe å registrere?") -> PushMessage {
        PushMessage(notificationID: UUID(), category: "inactivity", title: title, body: body,
                    data: [("route", "/activities/new"), ("category", "inactivity")], badge: 3, expiresAt: nil)
    }

    @Test func aShortMessageIsSentWhole() throws {
        let m = message(body: "Hei Kari!")
        let payload = APNsRequestBuilder.payload(m)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        let aps = try #require(json["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["title"] as? String == "Har du noe å registrere?")
        #expect(alert["body"] as? String == "Hei Kari!")
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "default")
        #expect(aps["thread-id"] as? String == "inactivity")
        #expect(json["notification_id"] as? String == m.notificationID.uuidString.lowercased())
        #expect(json["route"] as? String == "/activities/new")
    }

    @Test(arguments: [
        String(repeating: "a", count: 10_000),
        String(repeating: "🎉👩‍👩‍👧", count: 2_000),
        String(repeating: "שלום עולם ", count: 1_000),
        String(repeating: "\"quotes\" and \\backslashes\\ and \n newlines ", count: 300),
        String(repeating: "e\u{301}", count: 5_000),
    ])
    func longBodiesAreShortenedAtACharacterBoundaryToFit(body: String) throws {
        let payload = APNsRequestBuilder.payload(message(body: body))
        #expect(payload.utf8.count <= 4096)
        #expect(payload.utf8.count > 3900, "shortened far more than needed: \(payload.utf8.count)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
        let shortened = try #require(((json["aps"] as? [String: Any])?["alert"] as? [String: Any])?["body"] as? String)
        #expect(shortened.hasSuffix("…"))
        #expect(body.hasPrefix(String(shortened.dropLast())))
    }

    @Test func fcmBodiesFitTooAndDataIsStringsOnly() throws {
        let builder = FCMRequestBuilder(projectID: "demo")
        let text = builder.body(message(body: String(repeating: "🎉", count: 3_000)), token: "tok", now: Date())
        #expect(text.utf8.count <= 4096)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let message = try #require(json["message"] as? [String: Any])
        let data = try #require(message["data"] as? [String: Any])
        #expect(data.values.allSatisfy { $0 is String })
        #expect(data["route"] as? String == "/activities/new")
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["priority"] as? String == "HIGH")
        #expect((android["notification"] as? [String: Any])?["notification_count"] as? Int == 3)
    }

    /// A data value too big for any text to make room: the first pass cut title and body down to "…", then
    /// dropped the data (APNs); FCM sent the whole over 4096 bytes, which FCM refuses. Both now send the text,
    /// shortened only as needed, without the custom data, within the limit.
    @Test func aDataValueTooBigForAnyTextIsLeftOutAndTheTextKept() throws {
        var m = message(body: String(repeating: "Hei Kari! ", count: 300))
        m.data = [("route", "/activities/new"), ("note", String(repeating: "x", count: 5_000))]
        let apns = APNsRequestBuilder.payload(m)
        #expect(apns.utf8.count <= 4096)
        let apnsJSON = try #require(try JSONSerialization.jsonObject(with: Data(apns.utf8)) as? [String: Any])
        let alert = try #require((apnsJSON["aps"] as? [String: Any])?["alert"] as? [String: Any])
        #expect(alert["title"] as? String == "Har du noe å registrere?", "the title kept whole")
        #expect(((alert["body"] as? String)?.count ?? 0) > 2_000, "the body shortened only as needed: \(alert["body"] ?? "")")
        #expect(apnsJSON["note"] == nil && apnsJSON["notification_id"] != nil)
        let fcm = FCMRequestBuilder(projectID: "demo").body(m, token: "tok", now: Date())
        #expect(fcm.utf8.count <= 4096, "\(fcm.utf8.count) bytes")
        let fcmJSON = try #require(try JSONSerialization.jsonObject(with: Data(fcm.utf8)) as? [String: Any])
        let fcmMessage = try #require(fcmJSON["message"] as? [String: Any])
        #expect((fcmMessage["notification"] as? [String: Any])?["title"] as? String == "Har du noe å registrere?")
        let data = try #require(fcmMessage["data"] as? [String: Any])
        #expect(data["note"] == nil && data["notification_id"] != nil && data["category"] as? String == "inactivity")
    }

    /// FCM refuses a message whose data holds a reserved key (`from`, `message_type`, `google…`, `gcm…`): left out.
    @Test func fcmLeavesOutReservedDataKeys() throws {
        var m = message(body: "Hei")
        m.data = [("route", "/x"), ("from", "a"), ("message_type", "b"), ("google.c", "c"), ("gcm.d", "d")]
        let fcm = FCMRequestBuilder(projectID: "demo").body(m, token: "tok", now: Date())
        let data = try #require(((try JSONSerialization.jsonObject(with: Data(fcm.utf8)) as? [String: Any])?["message"] as? [String: Any])?["data"] as? [String: Any])
        #expect(Set(data.keys) == ["route", "notification_id", "category"], "\(data)")
    }

    @Test func fcmKeepsEveryCategoryForAnOfflinePhone() throws {
        // FCM keeps at most 4 collapse keys per device while it is offline and drops the rest with no rule
        // (fact sheet §2.3): a key per category (9 of them) lost whole categories overnight. No key: each
        // push is kept (up to 100) until its TTL, and the tag still makes a resend replace its notification.
        let builder = FCMRequestBuilder(projectID: "demo")
        var keys: Set<String> = []
        for category in ["inactivity", "assignment_follow_up", "new_assignment", "overdue_digest", "availability_change",
                         "activity_reminder", "milestone", "honorarium", "impact_summary"] {
            let m = PushMessage(notificationID: UUID(), category: category, title: "T", body: "B", data: [], badge: 1, expiresAt: nil)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(builder.body(m, token: "tok", now: Date()).utf8)) as? [String: Any])
            let android = try #require((json["message"] as? [String: Any])?["android"] as? [String: Any])
            if let key = (android["collapse_key"] ?? android["collapseKey"]) as? String { keys.insert(key) }
            #expect((android["notification"] as? [String: Any])?["tag"] as? String == m.collapseID)
        }
        #expect(keys.count <= 4, "collapse keys in use: \(keys.sorted())")
        #expect(keys.isEmpty)
    }

    @Test func apnsHeadersCarryTopicTypePriorityExpiryAndCollapseID() throws {
        let builder = APNsRequestBuilder(topic: "no.likeperson.app", productionEndpoint: "https://prod.example", sandboxEndpoint: "https://sandbox.example")
        var m = message(body: "x")
        m.expiresAt = Date(timeIntervalSince1970: 1_800_000_000)
        let production = builder.request(m, target: PushTarget(provider: .apns, token: "abcd", apnsEnvironment: .production), authorization: "jwt", tag: 1)
        let sandbox = builder.request(m, target: PushTarget(provider: .apns, token: "abcd", apnsEnvironment: .sandbox), authorization: "jwt", tag: 1)
        #expect(production.url == "https://prod.example/3/device/abcd")
        #expect(sandbox.url == "https://sandbox.example/3/device/abcd")
        let headers = Dictionary(production.headers, uniquingKeysWith: { a, _ in a })
        #expect(headers["apns-topic"] == "no.likeperson.app")
        #expect(headers["apns-push-type"] == "alert")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-expiration"] == "1800000000")
        #expect(headers["apns-collapse-id"] == m.notificationID.uuidString.lowercased())
        #expect(headers["apns-id"] == m.notificationID.uuidString.lowercased())
        #expect(headers["authorization"] == "bearer jwt")
    }

    /// A title of any length (an assignment's, from a coordinator) is shortened for FCM too, instead of the
    /// message going out over 4096 bytes and being refused.
    @Test func fcmShortensALongTitleToo() throws {
        var m = message(body: "Hei")
        m.title = String(repeating: "Å", count: 6000)
        let body = FCMRequestBuilder(projectID: "demo-project").body(m, token: "tok", now: Date())
        #expect(body.utf8.count <= 4096)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        let notification = ((json["message"] as? [String: Any])?["notification"] as? [String: Any])
        #expect((notification?["title"] as? String)?.hasSuffix("…") == true)
        #expect(notification?["body"] as? String == "…" || notification?["body"] as? String == "Hei")
    }

    /// A notification without an expiry is stored by APNs for a phone that is offline: no `apns-expiration`
    /// (`0` would tell APNs to try once and drop it, as `ttl` left out lets FCM keep it for four weeks).
    @Test func apnsKeepsAPushWithoutExpiryForAnOfflinePhone() throws {
        let builder = APNsRequestBuilder(topic: "no.likeperson.app", productionEndpoint: "https://prod.example", sandboxEndpoint: "https://sandbox.example")
        var m = message(body: "x")
        m.expiresAt = nil
        let request = builder.request(m, target: PushTarget(provider: .apns, token: "abcd", apnsEnvironment: .production), authorization: "jwt", tag: 1)
        #expect(!request.headers.contains { $0.0 == "apns-expiration" }, "\(request.headers)")
    }

    @Test func tokensAreOnlyEverShownShortened() {
        let token = String(repeating: "ab", count: 32)
        #expect(PushTarget(provider: .apns, token: token).redacted == "…ababab")
        #expect(!PushTarget(provider: .apns, token: token).redacted.contains(String(token.prefix(10))))
    }
}
