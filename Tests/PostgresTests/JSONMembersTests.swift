import Foundation
@testable import Postgres
import Testing

/// A notification's `data` becomes FCM's string map and APNs's custom keys: read straight from jsonb's
/// text when it is a flat object without escapes, and always exactly as the general JSON reader reads it.
@Suite struct JSONMembersTests {
    static let texts = [
        #"{"route": "/activities/new"}"#,
        #"{"id": "c0ffee", "route": "/assignments/c0ffee", "year": 2025, "ok": true, "none": null, "x": -0.5e+3}"#,
        #"{}"#, #"  { }  "#, #"{"å": "ø", "a": "Ærlig talt 🙂"}"#, #"{"b":"1","a":"2"}"#,
        #"{"quote": "say \"hi\""}"#, #"{"line": "a\nb", "u": "\u00e5"}"#, #"{"nested": {"a": "b"}, "k": "v"}"#,
        #"{"list": ["a"], "k": "v"}"#, #"{"a": "1", "a": "2"}"#, #"["a", "b"]"#, #""text""#, #"{"a": 01}"#,
        #"{"a": tru}"#, #"{"a": "b",}"#, #"{"a" "b"}"#, #"{"a": "b"} x"#, #"{"a": 1.}"#, #"{"a": -}"#, "{\"tab\": \"a\tb\"}",
    ]

    @Test(arguments: texts) func flatObjectsAreReadDirectlyAndEverythingAsTheGeneralReaderReadsIt(_ text: String) {
        let value = JSONValue(text: text)
        let general: [(String, String)] = {
            guard let object = (try? value.object()) as? [String: Any] else { return [] }
            return object.keys.sorted().compactMap { key in (object[key] as? String).map { (key, $0) } }
        }()
        let members = value.stringMembers()
        #expect(members.map(\.0) == general.map(\.0) && members.map(\.1) == general.map(\.1), "\(text)")
    }

    @Test func theDirectPathTakesWhatANotificationsDataIs() {
        #expect(JSONValue(text: #"{"id": "42", "route": "/assignments/42", "year": 2025}"#).flatStringMembers()?.map(\.0) == ["id", "route"])
        #expect(JSONValue(text: #"{"quote": "say \"hi\""}"#).flatStringMembers() == nil, "an escape takes the general path")
        #expect(JSONValue(text: #"{"nested": {"a": "b"}}"#).flatStringMembers() == nil)
    }
}
