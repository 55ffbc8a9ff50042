import Foundation

/// The FCM HTTP v1 `SendMessageRequest` schema, and the structural check Google's JSON front end applies
/// before FCM sees a message: unknown names, wrong JSON types, bad enums and durations, two targets. Field
/// names are accepted in proto spelling (`collapse_key`) and JSON spelling (`collapseKey`), enum values in
/// any case, as proto3 JSON parsing does.
final class FCMMessageSchema: Sendable {
    /// The proto type name, used in error messages (`google.firebase.fcm.v1.AndroidConfig`).
    let typeName: String
    /// Fields by both spellings.
    let fieldsByName: [String: Field]

    struct Field: Sendable {
        /// The proto (snake_case) name.
        var name: String
        var type: FieldType
        /// The oneof group the field belongs to (`target`), if any.
        var oneof: String?
    }

    indirect enum FieldType: Sendable {
        case string
        case bool
        case int32
        case float
        case duration
        case timestamp
        case enumeration(typeName: String, values: [String])
        /// `map<string, string>`; `entryType` names the map entry (`google.firebase.fcm.v1.Message.DataEntry`).
        case stringMap(entryType: String)
        case list(FieldType)
        case message(FCMMessageSchema)
        /// `google.protobuf.Struct`: any JSON object.
        case structValue
    }

    init(_ typeName: String, _ fields: [(String, FieldType)], oneofs: [String: String] = [:]) {
        self.typeName = typeName
        var byName: [String: Field] = [:]
        for (name, type) in fields {
            let field = Field(name: name, type: type, oneof: oneofs[name])
            byName[name] = field
            byName[Self.lowerCamelCase(name)] = field
        }
        fieldsByName = byName
    }

    /// `collapse_key` → `collapseKey`.
    static func lowerCamelCase(_ name: String) -> String {
        var result = ""
        var upperNext = false
        for character in name {
            if character == "_" { upperNext = true; continue }
            result.append(upperNext ? Character(character.uppercased()) : character)
            upperNext = false
        }
        return result
    }

    // MARK: The FCM v1 types (discovery document fcm/v1)

    private static let v1 = "google.firebase.fcm.v1."

    static let notification = FCMMessageSchema(v1 + "Notification", [("title", .string), ("body", .string), ("image", .string)])

    static let color = FCMMessageSchema("google.type.Color", [("red", .float), ("green", .float), ("blue", .float), ("alpha", .float)])

    static let lightSettings = FCMMessageSchema(v1 + "LightSettings", [
        ("color", .message(color)), ("light_on_duration", .duration), ("light_off_duration", .duration),
    ])

    static let androidNotification = FCMMessageSchema(v1 + "AndroidNotification", [
        ("title", .string), ("body", .string), ("icon", .string), ("color", .string), ("sound", .string),
        ("tag", .string), ("click_action", .string), ("body_loc_key", .string), ("body_loc_args", .list(.string)),
        ("title_loc_key", .string), ("title_loc_args", .list(.string)), ("channel_id", .string), ("ticker", .string),
        ("sticky", .bool), ("event_time", .timestamp), ("local_only", .bool),
        ("notification_priority", .enumeration(typeName: v1 + "AndroidNotification.NotificationPriority", values: [
            "PRIORITY_UNSPECIFIED", "PRIORITY_MIN", "PRIORITY_LOW", "PRIORITY_DEFAULT", "PRIORITY_HIGH", "PRIORITY_MAX",
        ])),
        ("default_sound", .bool), ("default_vibrate_timings", .bool), ("default_light_settings", .bool),
        ("vibrate_timings", .list(.duration)),
        ("visibility", .enumeration(typeName: v1 + "AndroidNotification.Visibility",
                                    values: ["VISIBILITY_UNSPECIFIED", "PRIVATE", "PUBLIC", "SECRET"])),
        ("notification_count", .int32), ("light_settings", .message(lightSettings)), ("image", .string),
        ("bypass_proxy_notification", .bool),
        ("proxy", .enumeration(typeName: v1 + "AndroidNotification.Proxy",
                               values: ["PROXY_UNSPECIFIED", "ALLOW", "DENY", "IF_PRIORITY_LOWERED"])),
    ])

    static let androidFcmOptions = FCMMessageSchema(v1 + "AndroidFcmOptions", [("analytics_label", .string)])

    static let androidConfig = FCMMessageSchema(v1 + "AndroidConfig", [
        ("collapse_key", .string),
        ("priority", .enumeration(typeName: v1 + "AndroidMessagePriority", values: ["NORMAL", "HIGH"])),
        ("ttl", .duration), ("restricted_package_name", .string),
        ("data", .stringMap(entryType: v1 + "AndroidConfig.DataEntry")),
        ("notification", .message(androidNotification)), ("fcm_options", .message(androidFcmOptions)),
        ("direct_boot_ok", .bool), ("restricted_satellite_ok", .bool), ("bandwidth_constrained_ok", .bool),
    ])

    static let webpushFcmOptions = FCMMessageSchema(v1 + "WebpushFcmOptions", [("link", .string), ("analytics_label", .string)])

    static let webpushConfig = FCMMessageSchema(v1 + "WebpushConfig", [
        ("headers", .stringMap(entryType: v1 + "WebpushConfig.HeadersEntry")),
        ("data", .stringMap(entryType: v1 + "WebpushConfig.DataEntry")),
        ("notification", .structValue), ("fcm_options", .message(webpushFcmOptions)),
    ])

    static let apnsFcmOptions = FCMMessageSchema(v1 + "ApnsFcmOptions", [("analytics_label", .string), ("image", .string)])

    static let apnsConfig = FCMMessageSchema(v1 + "ApnsConfig", [
        ("headers", .stringMap(entryType: v1 + "ApnsConfig.HeadersEntry")), ("payload", .structValue),
        ("fcm_options", .message(apnsFcmOptions)), ("live_activity_token", .string),
    ])

    static let fcmOptions = FCMMessageSchema(v1 + "FcmOptions", [("analytics_label", .string)])

    /// The message's targets: exactly one must be set.
    static let targetFields = ["token", "topic", "condition", "fid"]

    static let message = FCMMessageSchema(v1 + "Message", [
        ("name", .string), ("data", .stringMap(entryType: v1 + "Message.DataEntry")),
        ("notification", .message(notification)), ("android", .message(androidConfig)),
        ("webpush", .message(webpushConfig)), ("apns", .message(apnsConfig)), ("fcm_options", .message(fcmOptions)),
        ("token", .string), ("topic", .string), ("condition", .string), ("fid", .string),
    ], oneofs: ["token": "target", "topic": "target", "condition": "target", "fid": "target"])

    static let sendMessageRequest = FCMMessageSchema(v1 + "SendMessageRequest", [
        ("validate_only", .bool), ("message", .message(message)),
    ])
}

/// Walks a request body against ``FCMMessageSchema`` and collects every violation, as Google reports them all.
struct FCMStructureCheck {
    private(set) var violations: [GoogleErrors.FieldViolation] = []

    /// Checks `value` as an instance of `schema` found at `path` ("" for the request itself).
    mutating func check(_ value: JSONValue, as schema: FCMMessageSchema, path: String) {
        guard let members = value.members else { return }
        var oneofsSet: [String: String] = [:]
        for member in members {
            guard let field = schema.fieldsByName[member.key] else {
                let location = path.isEmpty ? "" : " at '\(path)'"
                violations.append(.init(field: path.isEmpty ? nil : path,
                                        description: "Invalid JSON payload received. Unknown name \"\(member.key)\"\(location): Cannot find field."))
                continue
            }
            if case .null = member.value { continue }  // proto3 JSON: null means "not set"
            let childPath = path.isEmpty ? member.key : "\(path).\(member.key)"
            if let oneof = field.oneof {
                if oneofsSet[oneof] != nil {
                    violations.append(.init(field: path.isEmpty ? nil : path,
                                            description: "Invalid value at '\(path)' (oneof), oneof field '\(oneof)' is already set. Cannot set '\(member.key)'"))
                    continue
                }
                oneofsSet[oneof] = member.key
            }
            check(member.value, as: field.type, key: member.key, path: childPath)
        }
    }

    private mutating func check(_ value: JSONValue, as type: FCMMessageSchema.FieldType, key: String, path: String) {
        func invalid(_ typeLabel: String, _ detail: String? = nil) {
            let description = "Invalid value at '\(path)' (\(typeLabel)), \(detail ?? Self.describe(value))"
            violations.append(.init(field: path, description: description))
        }
        switch type {
        case .string:
            if value.stringValue == nil { invalid("TYPE_STRING") }
        case .bool:
            if case .bool = value {} else { invalid("TYPE_BOOL") }
        case .int32:
            if Self.int32(value) == nil { invalid("TYPE_INT32") }
        case .float:
            switch value {
            case .number: break
            case .string(let text) where Double(text) != nil || ["NaN", "Infinity", "-Infinity"].contains(text): break
            default: invalid("TYPE_FLOAT")
            }
        case .duration:
            guard case .string(let text) = value else { invalid("type.googleapis.com/google.protobuf.Duration"); return }
            if !text.hasSuffix("s") {
                invalid("type.googleapis.com/google.protobuf.Duration",
                        "Field '\(key)', Illegal duration format; duration must end with 's'")
            } else if Self.durationSeconds(text) == nil {
                invalid("type.googleapis.com/google.protobuf.Duration",
                        "Field '\(key)', Invalid duration format, failed to parse seconds")
            }
        case .timestamp:
            guard case .string(let text) = value else { invalid("type.googleapis.com/google.protobuf.Timestamp"); return }
            if !Self.isRFC3339(text) {
                invalid("type.googleapis.com/google.protobuf.Timestamp", "Field '\(key)', Invalid time format: Failed to parse input")
            }
        case .enumeration(let typeName, let values):
            switch value {
            case .string(let text) where values.contains(where: { $0.caseInsensitiveCompare(text) == .orderedSame }): break
            case .number(let text) where Int(text).map({ values.indices.contains($0) }) == true: break
            default: invalid("type.googleapis.com/\(typeName)")
            }
        case .stringMap(let entryType):
            guard let members = value.members else { invalid("type.googleapis.com/\(entryType)"); return }
            for (index, member) in members.enumerated() where member.value.stringValue == nil {
                let entryPath = "\(path)[\(index)].value"
                violations.append(.init(field: entryPath,
                                        description: "Invalid value at '\(entryPath)' (TYPE_STRING), \(Self.describe(member.value))"))
            }
        case .list(let element):
            guard case .array(let elements) = value else {
                check(value, as: element, key: key, path: path)
                return
            }
            for (index, item) in elements.enumerated() {
                check(item, as: element, key: key, path: "\(path)[\(index)]")
            }
        case .message(let schema):
            guard value.isObject else { invalid("type.googleapis.com/\(schema.typeName)"); return }
            check(value, as: schema, path: path)
        case .structValue:
            if !value.isObject { invalid("type.googleapis.com/google.protobuf.Struct") }
        }
    }

    /// A value as Google quotes it after the type: numbers and literals as written, strings quoted.
    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .object: return "Starting an object on a scalar field"
        case .array: return "Starting an array on a scalar field"
        default: return value.jsonText
        }
    }

    /// An int32 given as a JSON integer or a numeric string.
    static func int32(_ value: JSONValue) -> Int32? {
        switch value {
        case .number(let text), .string(let text):
            if let integer = Int32(text) { return integer }
            if let double = Double(text), double.rounded() == double, let integer = Int32(exactly: double) { return integer }
            return nil
        default:
            return nil
        }
    }

    /// Seconds of a `google.protobuf.Duration` string (`"3600s"`, `"1.5s"`, up to nine fraction digits).
    static func durationSeconds(_ text: String) -> Double? {
        guard text.hasSuffix("s") else { return nil }
        var number = Substring(text.dropLast())
        if number.hasPrefix("-") { number = number.dropFirst() }
        let parts = number.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.allSatisfy(\.isASCIIDigit) else { return nil }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 9, parts[1].allSatisfy(\.isASCIIDigit) else { return nil }
        }
        guard let seconds = Double(text.dropLast()) else { return nil }
        return seconds
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    static func isRFC3339(_ text: String) -> Bool {
        let characters = Array(text)
        guard characters.count >= 20 else { return false }
        let pattern = Array("dddd-dd-ddTdd:dd:dd")
        for (index, expected) in pattern.enumerated() {
            if expected == "d" ? !characters[index].isASCIIDigit : characters[index] != expected { return false }
        }
        var rest = characters[19...]
        if rest.first == "." {
            rest = rest.dropFirst()
            let digits = rest.prefix(while: \.isASCIIDigit)
            guard (1...9).contains(digits.count) else { return false }
            rest = rest.dropFirst(digits.count)
        }
        if rest.elementsEqual(["Z"]) { return true }
        let zone = Array(rest)
        return zone.count == 6 && (zone[0] == "+" || zone[0] == "-") && zone[1].isASCIIDigit && zone[2].isASCIIDigit
            && zone[3] == ":" && zone[4].isASCIIDigit && zone[5].isASCIIDigit
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
