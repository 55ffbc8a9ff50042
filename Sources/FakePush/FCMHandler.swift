import Foundation

/// The fake FCM HTTP v1 send endpoint: bearer check, project check, Google's JSON front-end checks, FCM's
/// own message checks, then the token registry (fact sheet §2.8).
extension FakePushCore {
    private static let unauthenticatedSuffix =
        " Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."
    private static let analyticsLabelCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~%")
    private static let topicCharacters = analyticsLabelCharacters

    func handleFCM(_ request: FakeRequest) -> HandlerOutcome {
        let connection = request.connection
        connection.advertiseMaxConcurrentStreams(configuration.fcmMaxConcurrentStreams)

        // Path: /v1/projects/{project}/messages:send
        let components = request.path.split(separator: "/", omittingEmptySubsequences: false)
        guard request.method == "POST", components.count == 5, components[1] == "v1", components[2] == "projects",
              !components[3].isEmpty, components[4] == "messages:send"
        else { return HandlerOutcome(response: GoogleErrors.notFoundPage(path: request.rawPath)) }
        let project = String(components[3])

        // Bearer token.
        let now = configuration.now()
        guard let authorization = request.header("authorization") else {
            return HandlerOutcome(response: unauthenticated("Request is missing required authentication credential."))
        }
        guard let bearer = Self.bearerCredential(authorization) else {
            return HandlerOutcome(response: unauthenticated("Request had invalid authentication credentials."))
        }
        if let cached = connection.fcmBearer, cached.token == bearer, cached.expiresAt > now {
            // Same token as this connection's last request.
        } else if let issued = issuedAccessTokens.withLock({ $0[bearer] }), issued.expiresAt > now {
            connection.fcmBearer = (bearer, issued.expiresAt, issued.scope)
        } else {
            return HandlerOutcome(response: unauthenticated("Request had invalid authentication credentials."))
        }

        // Project.
        guard project == configuration.fcmProjectID else {
            return HandlerOutcome(response: GoogleErrors.response(
                status: 403, grpcStatus: "PERMISSION_DENIED",
                message: "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist)."))
        }

        // Quota (messages per minute, 429s not counted).
        if let quota = configuration.fcmQuotaPerMinute,
           let retryAfter = fcmQuota.withLock({ $0.admit(now: now, limit: quota) }) {
            return HandlerOutcome(response: Self.quotaExceeded(
                retryAfter: retryAfter, subject: "projects/\(project)", description: "Message rate exceeded."))
        }

        // Body: JSON, then the schema.
        let root: JSONValue
        if request.body.readableBytes == 0 {
            root = .object([])
        } else {
            do {
                root = try request.body.withUnsafeReadableBytes { try JSONParser.parse($0) }
            } catch {
                return HandlerOutcome(response: GoogleErrors.invalidArgument([.init(
                    field: nil, description: "Invalid JSON payload received. Unexpected token.")]))
            }
        }
        guard root.isObject else {
            return HandlerOutcome(response: GoogleErrors.invalidArgument([.init(
                field: nil, description: "Invalid JSON payload received. Expected an object.")]))
        }
        var structure = FCMStructureCheck()
        structure.check(root, as: FCMMessageSchema.sendMessageRequest, path: "")
        if !structure.violations.isEmpty {
            return HandlerOutcome(response: GoogleErrors.invalidArgument(structure.violations))
        }
        let validateOnly = Self.field(root, "validate_only") == .bool(true)
        func fail(_ response: FakeResponse) -> HandlerOutcome {
            HandlerOutcome(response: response, validateOnly: validateOnly)
        }

        // FCM's own checks.
        let message = Self.field(root, "message") ?? .object([])
        var targets: [(String, String)] = []
        for name in FCMMessageSchema.targetFields {
            if let value = Self.field(message, name)?.stringValue, !value.isEmpty { targets.append((name, value)) }
        }
        guard let target = targets.first else {
            return fail(GoogleErrors.fcmInvalidArgument("Recipient of the message is not set.", field: "message"))
        }
        if let problem = messageProblem(message, target: target) { return fail(problem) }

        // The registry, for token targets (topics and conditions always succeed).
        if target.0 == "token" {
            let state = registry.withLock { $0.isEmpty ? nil : $0[target.1] }
            if let response = fcmRegistryResponse(state ?? defaultFCMState(target.1)) { return fail(response) }
        }

        let messageID = validateOnly
            ? "fake_message"
            : "0:\(Int64(now.timeIntervalSince1970 * 1_000_000))%\(String(connection.nextRandom(), radix: 16))"
        let body = JSONValue.object([
            JSONMember("name", .string("projects/\(project)/messages/\(messageID)")),
        ]).googleStyleText
        var outcome = HandlerOutcome(response: FakeResponse(status: 200, headers: [GoogleErrors.jsonContentType], body: body),
                                     validateOnly: validateOnly)
        if configuration.onAccepted != nil {
            let (title, text) = Self.displayedText(message)
            outcome.accepted = AcceptedPush(
                provider: .fcm, target: target.0 == "token" ? target.1 : "\(target.0):\(target.1)", topic: nil,
                title: title, body: text, validateOnly: validateOnly)
        }
        return outcome
    }

    /// FCM's checks of a structurally valid message: reserved data keys, TTL range, analytics labels, topic
    /// names, size. Nil when it passes.
    private func messageProblem(_ message: JSONValue, target: (String, String)) -> FakeResponse? {
        let android = Self.field(message, "android")
        for (data, path) in [(Self.field(message, "data"), "message.data"), (android.flatMap { Self.field($0, "data") }, "message.android.data")] {
            for member in data?.members ?? [] {
                let key = member.key.lowercased()
                if key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm") {
                    return GoogleErrors.fcmInvalidArgument("Invalid data payload key: \(member.key)", field: path)
                }
            }
        }
        if let ttl = android.flatMap({ Self.field($0, "ttl") })?.stringValue,
           let seconds = FCMStructureCheck.durationSeconds(ttl), seconds < 0 || seconds > 2_419_200 {
            // Fake wording: FCM documents "invalid TTL" without a published message.
            return GoogleErrors.fcmInvalidArgument("The TTL must be between 0 and 2419200 seconds (4 weeks).",
                                                   field: "message.android.ttl")
        }
        let labelPaths: [(JSONValue?, String)] = [
            (Self.field(message, "fcm_options"), "message.fcm_options"),
            (android.flatMap { Self.field($0, "fcm_options") }, "message.android.fcm_options"),
            (Self.field(message, "apns").flatMap { Self.field($0, "fcm_options") }, "message.apns.fcm_options"),
            (Self.field(message, "webpush").flatMap { Self.field($0, "fcm_options") }, "message.webpush.fcm_options"),
        ]
        for (options, path) in labelPaths {
            guard let label = options.flatMap({ Self.field($0, "analytics_label") })?.stringValue else { continue }
            if label.isEmpty || label.count > 50 || !label.allSatisfy(Self.analyticsLabelCharacters.contains) {
                return GoogleErrors.fcmInvalidArgument("Analytics label must match ^[a-zA-Z0-9-_.~%]{1,50}$",
                                                       field: path + ".analytics_label")
            }
        }
        if target.0 == "topic", target.1.hasPrefix("/topics/") || !target.1.allSatisfy(Self.topicCharacters.contains) {
            return GoogleErrors.fcmInvalidArgument("Invalid topic name \(target.1)", field: "message.topic")
        }
        if let apns = Self.field(message, "apns"), let reason = apnsHeaderProblem(apns, message: message) {
            // Passed through to APNs, refused there: FCM answers with APNs's reason beside its own code (fact sheet §2.3, §2.4).
            return GoogleErrors.response(status: 400, grpcStatus: "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
                                         details: [GoogleErrors.fcmError("INVALID_ARGUMENT"), GoogleErrors.apnsError(statusCode: 400, reason: reason)])
        }
        let limit = target.0 == "token" || target.0 == "fid" ? 4096 : 2048
        if Self.payloadSize(message) > limit { return Self.messageTooBig }
        return nil
    }

    /// APNs's reason for the headers of a message's `apns` block, as the APNs route checks them (FCM passes them through
    /// to APNs); a data-only message to iOS may carry `apns-priority` 5 only. Nil when they pass.
    private func apnsHeaderProblem(_ apns: JSONValue, message: JSONValue) -> String? {
        var headers: [String: String] = [:]
        for member in Self.field(apns, "headers")?.members ?? [] {
            if let value = member.value.stringValue { headers[member.key.lowercased()] = value }
        }
        let pushType = headers["apns-push-type"]
        if let pushType, configuration.apnsPushTypes[pushType] == nil { return "InvalidPushType" }
        if let expiration = headers["apns-expiration"], !Self.isValidExpiration(expiration) { return "BadExpirationDate" }
        if let problem = Self.priorityProblem(headers["apns-priority"], pushType: pushType) { return problem }
        let alert = Self.field(apns, "payload")?["aps"]?["alert"]
        if Self.field(message, "notification") == nil && alert == nil && headers["apns-priority"] != "5" { return "BadPriority" }
        if let collapseID = headers["apns-collapse-id"], collapseID.utf8.count > 64 { return "BadCollapseId" }
        return nil
    }

    /// `400 INVALID_ARGUMENT` "Android message is too big", as FCM answers an oversized message.
    static let messageTooBig = GoogleErrors.response(
        status: 400, grpcStatus: "INVALID_ARGUMENT", message: "Android message is too big",
        details: [GoogleErrors.badRequest([]), GoogleErrors.fcmError("INVALID_ARGUMENT")])

    /// The registry's verdict for a token it does not list.
    private func defaultFCMState(_ token: String) -> TokenState {
        guard TokenSyntax.isWellFormedFCMToken(token) else { return .fcmInvalid }
        return configuration.acceptUnknownTokens ? .valid : .fcmUnregistered
    }

    /// The error for a registry state, nil for valid.
    private func fcmRegistryResponse(_ state: TokenState) -> FakeResponse? {
        switch state {
        case .valid:
            return nil
        case .fcmUnregistered, .unregistered, .expired:
            return GoogleErrors.response(status: 404, grpcStatus: "NOT_FOUND", message: "Requested entity was not found.",
                                         details: [GoogleErrors.fcmError("UNREGISTERED")])
        case .fcmInvalid, .badDeviceToken, .otherEnvironment:
            return GoogleErrors.response(status: 400, grpcStatus: "INVALID_ARGUMENT",
                                         message: "The registration token is not a valid FCM registration token",
                                         details: [GoogleErrors.fcmError("INVALID_ARGUMENT")])
        case .senderIDMismatch, .wrongTopic:
            return GoogleErrors.response(status: 403, grpcStatus: "PERMISSION_DENIED", message: "SenderId mismatch",
                                         details: [GoogleErrors.fcmError("SENDER_ID_MISMATCH")])
        case .thirdPartyAuthError:
            return Self.thirdPartyAuthError
        case .throttled:
            return Self.quotaExceeded(retryAfter: nil, subject: "device", description: "Device message rate exceeded.")
        }
    }

    private static let thirdPartyAuthError = GoogleErrors.response(
        status: 401, grpcStatus: "UNAUTHENTICATED", message: "Auth error from APNS or Web Push Service",
        details: [GoogleErrors.fcmError("THIRD_PARTY_AUTH_ERROR")])

    private static func quotaExceeded(retryAfter: Int?, subject: String, description: String) -> FakeResponse {
        GoogleErrors.response(
            status: 429, grpcStatus: "RESOURCE_EXHAUSTED", message: "Quota exceeded for the message target.",
            details: [GoogleErrors.fcmError("QUOTA_EXCEEDED"), GoogleErrors.quotaFailure(subject: subject, description: description)],
            extraHeaders: retryAfter.map { [("retry-after", String($0))] } ?? [])
    }

    /// `401 UNAUTHENTICATED` without an FcmError detail, with Google's `www-authenticate` challenge.
    private func unauthenticated(_ lead: String) -> FakeResponse {
        GoogleErrors.response(status: 401, grpcStatus: "UNAUTHENTICATED", message: lead + Self.unauthenticatedSuffix,
                              extraHeaders: [("www-authenticate", #"Bearer realm="https://accounts.google.com/""#)])
    }

    /// The FCM answer to an injected fault, or nil when the fault does not change the answer.
    func fcmFaultResponse(_ fault: Fault) -> FakeResponse? {
        switch fault {
        case .status500:
            return GoogleErrors.response(status: 500, grpcStatus: "INTERNAL", message: "Internal error encountered.",
                                         details: [GoogleErrors.fcmError("INTERNAL")])
        case .status503(let retryAfter):
            return GoogleErrors.response(status: 503, grpcStatus: "UNAVAILABLE", message: "The service is currently unavailable.",
                                         details: [GoogleErrors.fcmError("UNAVAILABLE")],
                                         extraHeaders: retryAfter.map { [("retry-after", String($0))] } ?? [])
        case .status503Until(let date):
            return GoogleErrors.response(status: 503, grpcStatus: "UNAVAILABLE", message: "The service is currently unavailable.",
                                         details: [GoogleErrors.fcmError("UNAVAILABLE")],
                                         extraHeaders: [("retry-after", HTTPDate.format(date))])
        case .tooManyRequests(let retryAfter):
            return Self.quotaExceeded(retryAfter: retryAfter, subject: "projects/\(configuration.fcmProjectID)",
                                      description: "Message rate exceeded.")
        case .payloadTooLarge:
            return Self.messageTooBig
        case .fcmThirdPartyAuth:
            return Self.thirdPartyAuthError
        case .expiredProviderToken, .invalidProviderToken:
            return unauthenticated("Request had invalid authentication credentials.")
        case .oauthInvalidGrant, .oauthServerError, .oauthInternalFailure, .oauthMalformedAccessToken, .slow, .dropConnection, .goaway, .shutdown, .proxyErrorPage:
            return nil
        }
    }

    /// A field by its proto name or its lowerCamelCase JSON name.
    static func field(_ object: JSONValue, _ protoName: String) -> JSONValue? {
        guard let members = object.members else { return nil }
        let camel = FCMMessageSchema.lowerCamelCase(protoName)
        return members.first { $0.key == protoName || $0.key == camel }?.value
    }

    /// What FCM counts against the 4 KB limit, as this fake measures it: the UTF-8 bytes of every key and
    /// every value (strings without quotes, numbers as written) in the message, targets excluded.
    static func payloadSize(_ message: JSONValue) -> Int {
        func size(_ value: JSONValue) -> Int {
            switch value {
            case .object(let members): return members.reduce(0) { $0 + $1.key.utf8.count + size($1.value) }
            case .array(let elements): return elements.reduce(0) { $0 + size($1) }
            case .string(let string): return string.utf8.count
            case .number(let text): return text.utf8.count
            case .bool(let flag): return flag ? 4 : 5
            case .null: return 0
            }
        }
        let excluded = Set(FCMMessageSchema.targetFields + ["name"])
        return (message.members ?? []).reduce(0) { total, member in
            excluded.contains(member.key) ? total : total + member.key.utf8.count + size(member.value)
        }
    }

    /// The title and body a phone would show: `notification`, else `android.notification`, else the APNs alert.
    static func displayedText(_ message: JSONValue) -> (String?, String?) {
        for notification in [field(message, "notification"),
                             field(message, "android").flatMap { field($0, "notification") }] {
            if let notification, field(notification, "title") != nil || field(notification, "body") != nil {
                return (field(notification, "title")?.stringValue, field(notification, "body")?.stringValue)
            }
        }
        if let alert = field(message, "apns").flatMap({ field($0, "payload") })?["aps"]?["alert"] {
            return (alert["title"]?.stringValue, alert.stringValue ?? alert["body"]?.stringValue)
        }
        return (nil, nil)
    }
}
