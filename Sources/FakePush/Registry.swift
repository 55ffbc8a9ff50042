import Foundation

/// What the fake's token registry says about a device token. APNs and FCM share one registry; a state
/// meant for the other provider is answered with its nearest equivalent (listed on each case).
public enum TokenState: Sendable, Hashable {
    /// Accepted: APNs 200, FCM 200 with a message name.
    case valid
    /// APNs `410 Unregistered` with this `timestamp` (milliseconds since 1970). FCM: `404 UNREGISTERED`.
    case unregistered(timestampMilliseconds: Int64)
    /// APNs `410 ExpiredToken`. FCM: `404 UNREGISTERED`.
    case expired
    /// APNs `400 BadDeviceToken`. FCM: `400 INVALID_ARGUMENT` (not a valid registration token).
    case badDeviceToken
    /// APNs `400 DeviceTokenNotForTopic`. FCM: `403 SENDER_ID_MISMATCH`.
    case wrongTopic
    /// APNs `429 TooManyRequests` (this device). FCM: `429 QUOTA_EXCEEDED` (device message rate).
    case throttled
    /// A token of the other APNs environment: `400 BadDeviceToken`. FCM: `400 INVALID_ARGUMENT`.
    case otherEnvironment
    /// FCM `404 NOT_FOUND` with FcmError `UNREGISTERED`. APNs: `410 Unregistered` stamped now.
    case fcmUnregistered
    /// FCM `400 INVALID_ARGUMENT` "The registration token is not a valid FCM registration token". APNs: `400 BadDeviceToken`.
    case fcmInvalid
    /// FCM `403 PERMISSION_DENIED` with FcmError `SENDER_ID_MISMATCH`. APNs: `400 DeviceTokenNotForTopic`.
    case senderIDMismatch
    /// FCM `401` with FcmError `THIRD_PARTY_AUTH_ERROR` (bad APNs credential behind FCM). APNs: `403 InvalidProviderToken`.
    case thirdPartyAuthError
}

/// Device-token syntax the real services accept, used when a token is not in the registry.
enum TokenSyntax {
    /// APNs: hex, an even number of digits, 16 to 200 of them (today's tokens are 64; Apple says not to rely on it).
    static func isWellFormedAPNsToken(_ token: Substring) -> Bool {
        let utf8 = token.utf8
        guard utf8.count >= 16, utf8.count <= 200, utf8.count % 2 == 0 else { return false }
        return utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
        }
    }

    /// FCM: 100 to 4096 characters of `[A-Za-z0-9_:-]` (real tokens are about 160, `<instance id>:APA91b…`).
    static func isWellFormedFCMToken(_ token: String) -> Bool {
        let utf8 = token.utf8
        guard utf8.count >= 100, utf8.count <= 4096 else { return false }
        return utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "-")
        }
    }
}
