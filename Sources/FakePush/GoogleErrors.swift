import Foundation

/// Google API error bodies (`google.rpc.Status` as JSON), printed the way Google's front ends print them:
/// two-space indentation, `"key": value`, a final newline.
enum GoogleErrors {
    static let jsonContentType = ("content-type", "application/json; charset=UTF-8")
    private static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    private static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"
    private static let quotaFailureType = "type.googleapis.com/google.rpc.QuotaFailure"

    /// One `fieldViolations` entry of a `google.rpc.BadRequest`.
    struct FieldViolation {
        var field: String?
        var description: String
    }

    /// `{"error":{"code":…,"message":…,"status":…,"details":[…]}}` with the given details.
    static func response(status: Int, grpcStatus: String, message: String, details: [JSONValue] = [],
                         extraHeaders: [(String, String)] = []) -> FakeResponse {
        var error: [JSONMember] = [
            JSONMember("code", .number(String(status))),
            JSONMember("message", .string(message)),
            JSONMember("status", .string(grpcStatus)),
        ]
        if !details.isEmpty { error.append(JSONMember("details", .array(details))) }
        let body = JSONValue.object([JSONMember("error", .object(error))]).googleStyleText
        return FakeResponse(status: status, headers: [jsonContentType] + extraHeaders, body: body)
    }

    /// An FcmError detail: `{"@type": "…FcmError", "errorCode": code}`.
    /// FCM's detail for an answer APNs gave to a message FCM passed on (fact sheet §2.4).
    static func apnsError(statusCode: Int, reason: String) -> JSONValue {
        .object([JSONMember("@type", .string("type.googleapis.com/google.firebase.fcm.v1.ApnsError")),
                 JSONMember("statusCode", .number(String(statusCode))), JSONMember("reason", .string(reason))])
    }

    static func fcmError(_ code: String) -> JSONValue {
        .object([JSONMember("@type", .string(fcmErrorType)), JSONMember("errorCode", .string(code))])
    }

    /// A BadRequest detail; with no violations it is the bare `{"@type": "…BadRequest"}` FCM sends for size errors.
    static func badRequest(_ violations: [FieldViolation]) -> JSONValue {
        var members = [JSONMember("@type", .string(badRequestType))]
        if !violations.isEmpty {
            members.append(JSONMember("fieldViolations", .array(violations.map { violation in
                var entry: [JSONMember] = []
                if let field = violation.field { entry.append(JSONMember("field", .string(field))) }
                entry.append(JSONMember("description", .string(violation.description)))
                return .object(entry)
            })))
        }
        return .object(members)
    }

    /// A QuotaFailure detail naming which quota ran out.
    static func quotaFailure(subject: String, description: String) -> JSONValue {
        .object([
            JSONMember("@type", .string(quotaFailureType)),
            JSONMember("violations", .array([.object([
                JSONMember("subject", .string(subject)),
                JSONMember("description", .string(description)),
            ])])),
        ])
    }

    /// `400 INVALID_ARGUMENT` for request-structure problems (unknown names, wrong types): the message joins
    /// the descriptions with newlines and a BadRequest detail lists each, as in Google's example 1.
    static func invalidArgument(_ violations: [FieldViolation]) -> FakeResponse {
        response(status: 400, grpcStatus: "INVALID_ARGUMENT",
                 message: violations.map(\.description).joined(separator: "\n"),
                 details: [badRequest(violations)])
    }

    /// `400 INVALID_ARGUMENT` from FCM's own message validation: BadRequest (when a field is named) plus
    /// FcmError `INVALID_ARGUMENT`.
    static func fcmInvalidArgument(_ message: String, field: String?) -> FakeResponse {
        var details: [JSONValue] = []
        if let field { details.append(badRequest([FieldViolation(field: field, description: message)])) }
        details.append(fcmError("INVALID_ARGUMENT"))
        return response(status: 400, grpcStatus: "INVALID_ARGUMENT", message: message, details: details)
    }

    /// Google's plain 404 page for paths no service serves.
    static func notFoundPage(path: String) -> FakeResponse {
        let escaped = path.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        let body = """
            <!DOCTYPE html>
            <html lang=en>
              <meta charset=utf-8>
              <title>Error 404 (Not Found)!!1</title>
              <p><b>404.</b> <ins>That’s an error.</ins>
              <p>The requested URL <code>\(escaped)</code> was not found on this server.  <ins>That’s all we know.</ins>

            """
        return FakeResponse(status: 404, headers: [("content-type", "text/html; charset=UTF-8")], body: body)
    }
}
