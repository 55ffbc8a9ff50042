import Foundation
import NIOCore

/// An APNs signing key the fake accepts provider tokens from: the public half of an `AuthKey_<keyID>.p8`.
public struct APNsKey: Sendable, Hashable {
    /// The 10-character Key ID, the JWT header's `kid`.
    public var keyID: String
    /// The 10-character Team ID, the JWT claims' `iss`.
    public var teamID: String
    /// The P-256 public key as PEM (`-----BEGIN PUBLIC KEY-----`).
    public var publicKeyPEM: String
    /// The one environment the key may push to (Apple lets a key be restricted to one), nil for both. Used
    /// against the other (``FakePushServer/Configuration/apnsDevelopment`` says which this server is), its
    /// tokens are answered `403 BadEnvironmentKeyInToken`.
    public var environment: Environment?

    /// An APNs environment.
    public enum Environment: Sendable, Hashable {
        case production, development
    }

    /// Creates a key entry.
    public init(keyID: String, teamID: String, publicKeyPEM: String, environment: Environment? = nil) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKeyPEM = publicKeyPEM
        self.environment = environment
    }
}

extension FakePushServer {
    /// Everything a fake server needs: its TLS identity, the credentials it accepts, and how it behaves.
    public struct Configuration: Sendable {
        // MARK: Listening

        /// The address to bind.
        public var host = "127.0.0.1"
        /// The port to bind; 0 picks a free one (read it back from ``FakePushServer/port``).
        public var port = 0
        /// A port of Google's services of their own (FCM and the OAuth token endpoint), as `fcm.googleapis.com`
        /// is another host than `api.push.apple.com`: ``port`` then serves APNs alone. Each port answers its own
        /// service's paths only (another's get that host's 404), and a new connection advertises its own
        /// service's stream limit, so what one provider's requests do to a connection never shows on the
        /// other's. nil: one port serves all three (the `fake-push` command's default; benchmarks). 0 picks a
        /// free one (read it back from ``FakePushServer/googlePort``).
        public var googlePort: Int? = nil
        /// The server certificate chain as PEM, leaf first.
        public var certificateChainPEM: String
        /// The server's private key as PEM.
        public var privateKeyPEM: String
        /// Event-loop threads. One HTTP/2 connection is always served by one thread, so more threads only
        /// help with several connections.
        public var threads = System.coreCount

        // MARK: HTTP/2

        /// `SETTINGS_MAX_CONCURRENT_STREAMS` a new connection advertises before its first request shows which
        /// provider it talks to: 1 by default, APNs' "one stream until a valid provider token" rule, the
        /// strictest of the services the one port stands for (Google's start at about 100; a client that opens
        /// one stream on a new connection until its first answer, as ours does, meets both alike). `nil` means
        /// the larger of ``apnsMaxConcurrentStreams`` and ``fcmMaxConcurrentStreams``: only for a benchmark
        /// comparing with clients that cannot start with one stream (h2load), never for a test. With a
        /// ``googlePort`` it is APNs' port's (nil: ``apnsMaxConcurrentStreams``); Google's port starts at
        /// ``fcmMaxConcurrentStreams``.
        /// Like APNs, the fake enforces every limit it advertises from the moment it sends it: a stream over the
        /// limit is refused (RST_STREAM REFUSED_STREAM) while the client has not acknowledged the SETTINGS frame,
        /// and ends the connection (GOAWAY PROTOCOL_ERROR) once it has.
        public var initialMaxConcurrentStreams: Int? = 1
        /// The stream limit a connection advertises (in a new SETTINGS frame) once it has sent a request with a
        /// valid APNs provider token. Apple has been seen advertising 500, 1000 and 1500.
        public var apnsMaxConcurrentStreams = 1000
        /// After an APNs error answer, the connection advertises one stream until its next success, then
        /// ``apnsMaxConcurrentStreams`` again: what Apple's servers were seen doing (fact sheet §1.6, openradar
        /// 27870881; §1.8 item 10, "if configured").
        public var apnsNarrowAfterError = false
        /// The stream limit a connection advertises once it has sent its first FCM request (Google: about 100).
        public var fcmMaxConcurrentStreams = 100
        /// After this many requests taken in hand on one connection, it sends a graceful GOAWAY (NO_ERROR) naming
        /// the last of them, lets their answers out and closes: a server recycling its connections (fact sheet
        /// §1.8 item 9, "GOAWAY after N streams"). Streams the client opened past it are refused, unprocessed, for
        /// it to send again elsewhere. nil: never.
        public var goAwayAfterStreams: Int? = nil
        /// A connection with no stream open for this many seconds gets a GOAWAY (NO_ERROR; APNs with debug data
        /// `{"reason":"IdleTimeout"}`) and is closed (fact sheet §1.8 item 9). nil: never.
        public var idleTimeout: Double? = nil

        // MARK: APNs

        /// The signing keys whose provider tokens are accepted.
        public var apnsKeys: [APNsKey] = []
        /// The bundle IDs the keys may push to (`apns-topic`, before its push-type suffix).
        public var apnsTopics: Set<String> = []
        /// Accepted `apns-push-type` values and the suffix each requires on the bundle ID in `apns-topic`.
        /// `mdm` is absent on purpose: its topic is a certificate UID, not a bundle ID.
        public var apnsPushTypes: [String: String] = [
            "alert": "", "background": "", "voip": ".voip", "complication": ".complication",
            "fileprovider": ".pushkit.fileprovider", "location": ".location-query",
            "liveactivity": ".push-type.liveactivity", "pushtotalk": ".voip-ptt", "widgets": ".push-type.widgets",
        ]
        /// When true, answers like the development (sandbox) environment: a 200 also carries `apns-unique-id`.
        public var apnsDevelopment = false
        /// When true, a well-formed token the registry does not know is valid (APNs: even-length hex,
        /// 16 to 200 characters; FCM: 100 to 4096 characters of `[A-Za-z0-9_:-]`). When false it is
        /// `400 BadDeviceToken` (APNs) or `404 UNREGISTERED` (FCM).
        public var acceptUnknownTokens = true
        /// A connection that switches to a different provider token sooner than this after its current token was
        /// first seen gets `429 TooManyProviderTokenUpdates` (Apple: 20 minutes).
        public var tokenRefreshFloor: TimeInterval = 20 * 60
        /// How old a provider token's `iat` may be before `403 ExpiredProviderToken` (Apple: one hour).
        public var providerTokenLifetime: TimeInterval = 3600

        // MARK: FCM and OAuth

        /// The Firebase project ID in `/v1/projects/{id}/messages:send`.
        public var fcmProjectID: String
        /// The service account's `client_email`: the `iss` the OAuth assertion must carry.
        public var serviceAccountEmail: String
        /// The service account's RSA public key (`-----BEGIN PUBLIC KEY-----`) that verifies the RS256 assertion.
        public var serviceAccountPublicKeyPEM: String
        /// `expires_in` of issued access tokens, in seconds; after that FCM answers 401.
        public var oauthTokenLifetime = 3599
        /// FCM's per-project quota in messages per minute over a sliding window (Google's default is 600,000);
        /// nil means unlimited. Every send that gets past authentication counts except 429s; over the quota a
        /// send gets `429 RESOURCE_EXHAUSTED` (FcmError `QUOTA_EXCEEDED`, a QuotaFailure, `Retry-After`).
        public var fcmQuotaPerMinute: Int? = nil

        // MARK: Behaviour

        /// When false, requests are only counted, not kept (benchmarks). ``FakePushServer/requests()`` is then empty.
        public var recordRequests = true
        /// Every APNs and FCM answer waits this long (a real provider's round trip, tens of milliseconds),
        /// without holding up the connection's other streams. Zero: at once.
        public var responseLatency: Double = 0
        /// The clock every check uses (JWT age, refresh floor, OAuth expiry). Tests inject their own.
        public var now: @Sendable () -> Date = { Date() }
        /// Called for every push the fake accepted (200), on an event-loop thread. Keep it quick.
        public var onAccepted: (@Sendable (AcceptedPush) -> Void)? = nil

        /// Creates a configuration with the TLS identity and the credentials the fake accepts.
        public init(
            certificateChainPEM: String,
            privateKeyPEM: String,
            apnsKeys: [APNsKey] = [],
            apnsTopics: Set<String> = [],
            fcmProjectID: String = "demo-project",
            serviceAccountEmail: String = "",
            serviceAccountPublicKeyPEM: String = ""
        ) {
            self.certificateChainPEM = certificateChainPEM
            self.privateKeyPEM = privateKeyPEM
            self.apnsKeys = apnsKeys
            self.apnsTopics = apnsTopics
            self.fcmProjectID = fcmProjectID
            self.serviceAccountEmail = serviceAccountEmail
            self.serviceAccountPublicKeyPEM = serviceAccountPublicKeyPEM
        }
    }
}

/// Why a fake server could not start.
public enum FakePushError: Error, CustomStringConvertible, Sendable {
    /// A certificate, key or setting is unusable; the message names which and why.
    case invalidConfiguration(String)
    /// The address could not be bound.
    case bindFailed(String)

    /// The message, naming what to fix.
    public var description: String {
        switch self {
        case .invalidConfiguration(let message): return message
        case .bindFailed(let message): return message
        }
    }
}
