import Push
import TextCoding

/// What one delivery run did, for the summary line and the log.
public struct DeliveryReport: Sendable {
    public var claimed = 0
    public var sent = 0
    public var retried = 0
    public var failed = 0
    public var dead = 0
    public var expired = 0
    public var tokensRetired = 0
    /// Released unsent, without burning an attempt, because their provider's credentials are broken.
    public var held = 0
    /// Providers that stopped this run, with the reason (credentials or configuration).
    public var brokenProviders: [String: String] = [:]
    /// Providers that go on, but whose pushes to one platform wait for a setting to be fixed (FCM's
    /// `THIRD_PARTY_AUTH_ERROR`: the APNs or Web Push key in the Firebase project), with the reason: a
    /// configuration alarm (78).
    public var platformAlarms: [String: String] = [:]
    /// Pushes that wait for such a setting (`platformAlarms`), due again in an hour, no attempt counted.
    public var waitingForSetup = 0
    /// A provider refused our credentials (not a suspect setup, nor an environment a key cannot serve): a
    /// long-lived job reads them again before its next delivery.
    public var credentialsRefused = false
    /// Providers that could not be reached to start with (the OAuth endpoint was down, say).
    public var unavailableProviders: [String: String] = [:]
    /// The signal that stopped the run early ("SIGTERM"), if one did.
    public var stoppedBy: String?
    /// Pushes that waited (retries, late ones, ones the job deferred) found inside their recipient's quiet hours
    /// (which may have moved since): due again when the window ends.
    public var postponed = 0
    /// Cancelled when claimed, never sent: the device token had moved to another user than the notification's.
    public var cancelled = 0
    /// Cancelled when claimed, never sent: a reminder that waited (deferred for the quiet hours, a retry), for a
    /// mentor whose pause, saved in advance, had begun meanwhile.
    public var cancelledPaused = 0
    /// Cancelled when claimed, never sent: a push that waited, found inside its recipient's quiet hours, which last
    /// past its expiry (a push-only notification joins the inbox instead of expiring unseen).
    public var cancelledQuietPastExpiry = 0
    /// Claimed, then cancelled by the app (pushes switched off, the notification read, the token moved …) before
    /// they were started: not sent (0038).
    public var withdrawn = 0
    /// Claimed but not sent: released at once for the next claim, no attempt burned (a stop came, or the claim
    /// ran out before the push could start).
    public var released = 0
    /// Claims of earlier runs that ended without recording an answer (0031), counted as attempts by this run's claims.
    public var lostClaimsCounted = 0
    /// Of `dead`, those given up because such lost claims spent their attempts (each may have been sent).
    public var deadAfterLostClaims = 0
    /// The final outcomes by provider ("apns" → "sent" → 3), for the metrics.
    public var byProvider: [String: [String: Int]] = [:]

    /// What happened to one delivery.
    public enum Outcome: String, Sendable { case sent, retried, failed, dead, expired }

    /// Counts one delivery's outcome, in the totals and by its provider.
    mutating func count(_ outcome: Outcome, _ provider: PushTarget.Provider) {
        switch outcome {
        case .sent: sent += 1
        case .retried: retried += 1
        case .failed: failed += 1
        case .dead: dead += 1
        case .expired: expired += 1
        }
        byProvider[provider.rawValue, default: [:]][outcome.rawValue, default: 0] += 1
    }

    public init() {}

    /// Adds another run's counts (parallel workers).
    public mutating func add(_ other: DeliveryReport) {
        claimed += other.claimed
        sent += other.sent
        retried += other.retried
        failed += other.failed
        dead += other.dead
        expired += other.expired
        tokensRetired += other.tokensRetired
        held += other.held
        released += other.released
        postponed += other.postponed
        waitingForSetup += other.waitingForSetup
        cancelled += other.cancelled
        cancelledPaused += other.cancelledPaused
        cancelledQuietPastExpiry += other.cancelledQuietPastExpiry
        withdrawn += other.withdrawn
        lostClaimsCounted += other.lostClaimsCounted
        deadAfterLostClaims += other.deadAfterLostClaims
        stoppedBy = stoppedBy ?? other.stoppedBy
        credentialsRefused = credentialsRefused || other.credentialsRefused
        for (provider, counts) in other.byProvider { byProvider[provider, default: [:]].merge(counts, uniquingKeysWith: +) }
        brokenProviders.merge(other.brokenProviders) { first, _ in first }
        platformAlarms.merge(other.platformAlarms) { first, _ in first }
        unavailableProviders.merge(other.unavailableProviders) { first, _ in first }
    }

    public var json: String {
        var writer = JSONWriter()
        writer.add("claimed", claimed)
        writer.add("sent", sent)
        writer.add("retried", retried)
        writer.add("failed", failed)
        writer.add("dead", dead)
        writer.add("expired", expired)
        writer.add("tokens_retired", tokensRetired)
        writer.add("held", held)
        if postponed > 0 { writer.add("postponed_for_quiet_hours", postponed) }
        if cancelled > 0 { writer.add("cancelled_token_moved", cancelled) }
        if cancelledPaused > 0 { writer.add("cancelled_paused", cancelledPaused) }
        if cancelledQuietPastExpiry > 0 { writer.add("cancelled_quiet_hours_past_expiry", cancelledQuietPastExpiry) }
        if withdrawn > 0 { writer.add("cancelled_after_claim", withdrawn) }
        if lostClaimsCounted > 0 { writer.add("lost_claims_counted", lostClaimsCounted) }
        if deadAfterLostClaims > 0 { writer.add("dead_after_lost_claims", deadAfterLostClaims) }
        if !byProvider.isEmpty {
            var providers = JSONWriter()
            for (provider, counts) in byProvider.sorted(by: { $0.key < $1.key }) {
                var outcomes = JSONWriter()
                for (outcome, count) in counts.sorted(by: { $0.key < $1.key }) { outcomes.add(outcome, count) }
                providers.add(provider, json: outcomes.json)
            }
            writer.add("by_provider", json: providers.json)
        }
        if !brokenProviders.isEmpty { writer.add("broken_providers", strings: brokenProviders.keys.sorted()) }
        if waitingForSetup > 0 { writer.add("waiting_for_setup", waitingForSetup) }
        if !platformAlarms.isEmpty { writer.add("platform_alarms", strings: platformAlarms.keys.sorted()) }
        // Claimed, then given back unsent (a stop, a claim running out before its push could start): with the
        // outcomes above, what the run claimed.
        if released > 0 || stoppedBy != nil { writer.add("released", released) }
        if let stoppedBy { writer.add("stopped_by", stoppedBy) }
        return writer.json
    }

    public var sentence: String {
        var text = "push: \(sent) sent, \(retried) to retry, \(failed) failed, \(dead) dead, \(expired) expired, \(tokensRetired) tokens retired"
        if held > 0 { text += ", \(held) held back" }
        if postponed > 0 { text += ", \(postponed) postponed to the end of their recipient's quiet hours" }
        if cancelled > 0 { text += ", \(cancelled) cancelled (the device token now belongs to another user)" }
        if cancelledPaused > 0 { text += ", \(cancelledPaused) cancelled (the mentor's pause began while they waited)" }
        if cancelledQuietPastExpiry > 0 { text += ", \(cancelledQuietPastExpiry) cancelled (quiet hours last past their expiry)" }
        if withdrawn > 0 { text += ", \(withdrawn) cancelled by the app after they were claimed (not sent)" }
        if lostClaimsCounted > 0 {
            text += ", \(lostClaimsCounted) claim(s) of runs that ended without recording an answer counted as attempts"
        }
        if deadAfterLostClaims > 0 { text += " (\(deadAfterLostClaims) of the dead given up after such claims: each may have been sent)" }
        for (provider, reason) in brokenProviders.sorted(by: { $0.key < $1.key }) { text += "; \(provider) stopped: \(reason)" }
        for (provider, reason) in platformAlarms.sorted(by: { $0.key < $1.key }) {
            text += "; \(provider): \(waitingForSetup) push(es) wait an hour for a setting: \(reason)"
        }
        for (provider, reason) in unavailableProviders.sorted(by: { $0.key < $1.key }) { text += "; \(provider) unavailable: \(reason)" }
        if let stoppedBy {
            text += "; stopped by \(stoppedBy): \(released) claimed and unsent, released for the next run"
        } else if released > 0 {
            text += ", \(released) claimed and unsent, released to be claimed again"
        }
        return text
    }
}
