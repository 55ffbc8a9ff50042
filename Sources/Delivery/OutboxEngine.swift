import Foundation
import HTTP2
import JobKit
import Logging
import Postgres
import Push
import ScenarioEngine
import Synchronization

/// The outbox engine: claims due deliveries in batches from `delivery_queue` (`FOR UPDATE SKIP LOCKED`,
/// then a lease in `lease_until`), sends them over HTTP/2, and records each outcome as it completes, with an
/// entry in the append-only `delivery_events`. Many engines on many hosts can drain one database:
/// a claimed row is invisible to the others until its lease runs out, so a crash loses nothing
/// and can repeat only what was in flight (each push carries a collapse id, so the device shows one).
public final class OutboxEngine {
    /// Which deliveries a run drains.
    public enum Scope: Sendable {
        case all
        /// Only the deliveries of one job run's notifications (a scenario job delivering what it recorded).
        case jobRun(Int)

        /// The job run of `jobRun`.
        var runID: Int? { if case .jobRun(let id) = self { id } else { nil } }
    }

    let connection: Connection
    let providers: [PushTarget.Provider: any PushProvider]
    let client: HTTP2Client
    let maxAttempts: Int
    /// The APNs environments this deployment pushes to (`APNS_ENVIRONMENTS`); a delivery to a token of another
    /// is settled as failed, never sent.
    var apnsEnvironments: Set<PushTarget.APNsEnvironment> = [.production, .sandbox]
    let logger: Logger
    /// How long a claimed delivery stays invisible to other engines.
    public let lease: TimeInterval
    public static let defaultLease: TimeInterval = 300

    /// `configuration` with a request timeout of at most half the lease: no push may outlive the claim on
    /// its row, and half the lease remains for starting the batch's pushes.
    public static func http(_ configuration: HTTP2Client.Configuration, lease: TimeInterval) -> HTTP2Client.Configuration {
        var configuration = configuration
        configuration.requestTimeout = min(configuration.requestTimeout, .milliseconds(Int64(lease * 500)))
        return configuration
    }
    /// Deliveries per claim at most: 40 windows (4,000 by default), so a claim's fixed cost is spread thin.
    /// With a writer, claims are sized by the pace (`ClaimSizer`), and the next one, started when half of
    /// the last is left, arrives long before the window runs dry; in line, every claim takes this many.
    public var batchSize: Int
    /// Completed outcomes are written once this many are waiting and the writer is free, or this long
    /// after the last write, so a crash can repeat only what was in flight plus what waits to be written
    /// (at most `maxPendingOutcomes`). Each write has a fixed cost in the database (a transaction, its
    /// statements): two thousand rows per write spend it once for all of them, and the interval still
    /// bounds how much a crash can repeat in time.
    public var flushEvery = 2000
    public var flushInterval: Duration = .milliseconds(100)
    /// With a writer: outcomes handed over at once at most (it waits for a free writer up to this many).
    public var maxPendingOutcomes = 3000
    /// With a writer: writes handed over and not finished at most; past that no new push goes out until the
    /// writer catches up (a database slower than the pushes would otherwise gather sent pushes that a crash, or
    /// a lease running out, sends again). The answers on the way are still read meanwhile.
    public var maxQueuedWrites = 2
    var backoff = Backoff()
    /// The size of each claim ahead, from the pace; made afresh by every run.
    private var claimSizer = ClaimSizer(window: 1, maximum: 1)
    /// The mass-retirement guard: `BadDeviceToken`, `DeviceTokenNotForTopic` and `SENDER_ID_MISMATCH`
    /// can mean that our environment, topic or project is wrong rather than the token. Until a push of
    /// the same provider and environment has succeeded in this run (or, for a long-lived engine such as
    /// event-notify's, in an earlier one: the setup cannot change within a process, and its runs are a push or
    /// two, so one cleared each run would never confirm and its bad tokens would die of attempts instead of
    /// being retired: `confirmed` is kept), such tokens are held, not retired;
    /// when `suspectLimit` pile up with no success, the provider is stopped as misconfigured and none
    /// of them is retired. At the end of the run, the few still held are tried again later, not retired.
    public var suspectLimit = 20
    /// Asked to stop (SIGTERM, SIGINT): no new batch is claimed and no new push started; what is in
    /// flight completes and is recorded; the rest of the batch is released for the next run.
    public var stop: StopRequest = .shared
    private var confirmed = Set<SuspectKey>()
    /// Endpoints a push succeeded on in this run: the first success on each writes its setup down (0035's
    /// `confirmed_setups`), which proves it for later runs too (`confirmedSetupLife`).
    private var confirmedThisRun = Set<SuspectKey>()
    /// How long a setup a push proved right stays proven for runs without a success of their own.
    static let confirmedSetupLife = 7 * 86_400
    /// Endpoints stopped because `suspectLimit` tokens answered as if our setup were wrong: a success that was
    /// still on its way proves the setup right after all, and they go on.
    private var stoppedAsSuspect = Set<SuspectKey>()
    /// Endpoints whose setup a push proved right in an earlier run (0035), as it is set now: their suspects are
    /// retired at once, up to `suspectLimit` in a run with no success of its own; past that the proof is withdrawn
    /// and they are held as without one (a setup gone wrong since must not retire every token in one run).
    private var provenEarlier = Set<SuspectKey>()
    /// Of those, the ones proved within the hour: a success writes no new proof (event-notify's runs are a batch each).
    private var provenLately = Set<SuspectKey>()
    /// Suspects retired in this run on an earlier run's proof alone, by endpoint.
    private var retiredOnEarlierProof: [SuspectKey: Int] = [:]
    /// Why an endpoint was stopped as misconfigured (suspect, or a key for the other environment), and why a
    /// provider was stopped as a whole (its credentials refused, an answer without HTTP/2): what the run's 78
    /// says once a stop as suspect is lifted.
    private var brokenEndpoints: [SuspectKey: String] = [:]
    private var providerStops: [PushTarget.Provider: String] = [:]
    /// Tokens this run retired: their deliveries still queued in a batch are settled, not sent.
    private var retiredTokens = Set<Int>()
    /// Endpoints stopped for this run, by provider and environment, with the reason: one that could not be
    /// reached, or one whose tokens all answered as if our environment or topic were wrong. APNs's production
    /// and sandbox are two hosts and two setups: either stops only its own pushes, and its deliveries are not
    /// claimed again in this run; the provider stops when all of its endpoints have.
    private var stoppedEndpoints: [SuspectKey: String] = [:]
    /// Endpoints stopped for an outage (unreachable, or answering 5xx), until when a long-lived engine's later runs
    /// leave them stopped too: event-notify's runs are a batch each, and each paid the outage again (a connect
    /// timeout, five requests into the 5xx, each an attempt) while its events waited. push-deliver's minute runs
    /// still try.
    private var outages: [SuspectKey: (reason: String, until: ContinuousClock.Instant)] = [:]
    static let outageMemory: Duration = .seconds(60)
    /// Answers from the provider's side (5xx, or none at all) in a row per endpoint, since its last other answer.
    /// While any endpoint has some, pushes go out one at a time (a window opened by the first answer would
    /// otherwise put a hundred into an outage at once).
    private var serverFailuresInARow: [SuspectKey: Int] = [:]
    /// Pushes started so far by this engine (`Claimed.startedAs`).
    private var startedPushes = 0
    /// Per endpoint, the pushes started up to its last push counted as failing with no answer: those on the wire
    /// then went down with the same broken connection, and count with it as one failure, not one each (a single
    /// dropped connection with a window of 20 in flight stopped the endpoint for the run).
    private var noAnswerCountedUpTo: [SuspectKey: Int] = [:]
    /// Pushes refused this run for the credential the provider keeps for their platform (`platformCredentialsBroken`).
    private var platformRefusals: [SuspectKey: Int] = [:]
    /// How long a push refused for its platform's credential waits before it is tried again.
    static let platformCredentialsWait: TimeInterval = 3600
    /// Answers from the provider's side in a row after which an endpoint stops for the run (69): in an outage
    /// every due push burned an attempt, run after run, and an outage of an hour or two made them all dead.
    public var serverFailureLimit = 5
    /// What the last run did (so far, if it threw).
    public private(set) var lastReport = DeliveryReport()
    /// Writes outcomes and claims the next batch on its own thread and connection while pushes go out
    /// (push-deliver sets one); without it both happen in line.
    var writer: OutboxWriter?
    private var suspects: [SuspectKey: [(claimed: Claimed, reason: String, status: Int?)]] = [:]
    /// The categories' presentation, read by the run's first claim (on whichever thread claims first).
    private let presentationsLoaded = Mutex<[String: PushMessage.Presentation]?>(nil)
    /// Per job run, the delivery id below which the run has nothing left for this engine to claim: its claims go
    /// in id order from there. A run's deliveries get ever higher ids (event-notify records batch after batch,
    /// each delivered after its commit), so a claim looks at this batch's rows, not at every row the run ever
    /// queued: a claim that joined all the run's notifications took 5 ms at 1,000 events/s and grew with the
    /// service's life. What a claim passed over (locked by another engine, not yet due, held back) is push-deliver's.
    private let runFloors = Mutex<[Int: Int]>([:])
    /// How deliveries in doubt are claimed (0045): push-deliver's workers share one.
    var careful = CarefulClaims()
    /// Lost claims this run's claims counted as attempts (claims run on the writer's thread too).
    private let lostClaimsCounted = Mutex(0)
    /// Hears the app's cancels of claimed deliveries (0038): none of them is started. Nil: none is heard.
    var cancels: CancelListener?
    /// Where the database time went (logged at debug level): claiming, writing outcomes, and how long the
    /// pushes stood still waiting for a claim made ahead (the sign that claims, not pushes, set the pace).
    private var timings: (claims: Duration, claimWaits: Duration, claimWaitCount: Int, writeWaits: Duration, writeWaitCount: Int) = (.zero, .zero, 0, .zero, 0)
    /// Time spent writing outcomes: the writer's thread writes too, so it is kept apart, under a lock.
    private let flushTime = Mutex<Duration>(.zero)

    public init(connection: Connection, providers: [PushTarget.Provider: any PushProvider], client: HTTP2Client,
                maxAttempts: Int, lease: TimeInterval = OutboxEngine.defaultLease, logger: Logger) {
        self.connection = connection
        self.providers = providers
        self.client = client
        self.maxAttempts = maxAttempts
        self.lease = lease
        self.logger = logger
        self.batchSize = max(500, client.configuration.window * 40)
    }

    /// An engine with its own HTTP/2 client, whose request timeout is kept within half of `lease`.
    /// A libcurl that cannot do HTTP/2 is an installation problem (78), not a bug of ours (70).
    public convenience init(connection: Connection, settings: PushSettings, lease: TimeInterval, logger: Logger) throws {
        let providers: [PushTarget.Provider: any PushProvider]
        let client: HTTP2Client
        do {
            providers = try settings.providers()
            client = try HTTP2Client(OutboxEngine.http(settings.http, lease: lease))
        } catch let error as HTTPTransportError where error.isOurSetup {
            throw JobFailure(.config, error.message)
        }
        self.init(connection: connection, providers: providers, client: client,
                  maxAttempts: settings.maxAttempts, lease: lease, logger: logger)
        apnsEnvironments = settings.apnsEnvironments
    }

    /// Why a delivery to a `provider` token of `environment` is not pushed by this deployment at all (its APNs
    /// environment is not one `APNS_ENVIRONMENTS` names), or nil.
    static func unserved(_ provider: PushTarget.Provider, _ environment: PushTarget.APNsEnvironment?,
                         serving environments: Set<PushTarget.APNsEnvironment>) -> String? {
        guard provider == .apns, let environment, !environments.contains(environment) else { return nil }
        let served = environments.map(\.rawValue).sorted().joined(separator: ",")
        return "APNs \(environment.rawValue) is not pushed to by this deployment (APNS_ENVIRONMENTS=\(served)): the token of a \(environment == .sandbox ? "development" : "release") build"
    }

    /// Sends everything due in `scope`, batch after batch, until nothing is due.
    public func run(scope: Scope) throws -> DeliveryReport {
        let scheduleAtStart = ThreadSchedule.current()
        // The database says which tokens are retired (each claim reads it); this run's own list starts empty, so
        // a long-lived engine (event-notify's) never holds on to a retirement the database did not make (the
        // app registered the token again in between).
        retiredTokens.removeAll()
        lostClaimsCounted.withLock { $0 = 0 }
        // The categories' presentation as it is now: a long-lived engine (event-notify's, for weeks) kept the
        // sound, thread and channel it first read.
        presentationsLoaded.withLock { $0 = nil }
        claimSizer = ClaimSizer(window: client.configuration.window, maximum: batchSize)
        let now = ContinuousClock.now
        outages = outages.filter { $0.value.until > now }
        stoppedEndpoints.removeAll()
        serverFailuresInARow.removeAll()
        noAnswerCountedUpTo.removeAll()
        platformRefusals.removeAll()
        confirmedThisRun.removeAll()
        stoppedAsSuspect.removeAll()
        provenEarlier.removeAll()
        provenLately.removeAll()
        retiredOnEarlierProof.removeAll()
        brokenEndpoints.removeAll()
        providerStops.removeAll()
        var report = DeliveryReport()
        // What the run did, kept when it throws too: a failed run's summary says what went out before.
        defer {
            report.lostClaimsCounted = lostClaimsCounted.withLock { $0 }
            lastReport = report
            careful.release(for: ObjectIdentifier(self))
        }
        var usable = Set(providers.keys)
        for (endpoint, outage) in outages.sorted(by: { $0.key.description < $1.key.description }) where usable.contains(endpoint.provider) {
            let name = providers[endpoint.provider]!.name
            report.unavailableProviders[name] = report.unavailableProviders[name] ?? "\(endpoint) \(outage.reason) (in an earlier run: tried again within a minute)"
            stopEndpoint(endpoint, reason: outage.reason, live: &usable)
        }
        // An endpoint whose provider named when to come back waits until then, in every run (0030).
        // The run says so (69) only while some of its pushes are due: a hold of an hour paged the operator for an
        // hour with nothing waiting on it.
        for hold in try OutboxEngine.holds(on: connection) where usable.contains(hold.endpoint.provider) {
            let why = "held until \(Timestamp.iso8601(hold.until)) as its provider asked (\(hold.reason))"
            let name = providers[hold.endpoint.provider]!.name
            if try OutboxEngine.hasDue(hold.endpoint, scope: scope, on: connection) {
                report.unavailableProviders[name] = report.unavailableProviders[name] ?? "\(hold.endpoint) \(why)"
            }
            stopEndpoint(hold.endpoint, reason: why, live: &usable)
        }
        // Setups proved right by a push in an earlier run (0035), as they are set now.
        for proof in try OutboxEngine.confirmedSetups(on: connection)
            where providers[proof.endpoint.provider]?.setup(of: proof.endpoint.environment) == proof.setup {
            provenEarlier.insert(proof.endpoint)
            if proof.lately { provenLately.insert(proof.endpoint) }
        }
        for (kind, provider) in providers where usable.contains(kind) {
            do { try provider.prepare() } catch {
                switch error.outcome {
                case .credentialsBroken(let reason): report.brokenProviders[provider.name] = reason; report.credentialsRefused = true
                default: report.unavailableProviders[provider.name] = error.outcome.reason
                }
                logger.error("\(provider.name): cannot send: \(report.brokenProviders[provider.name] ?? report.unavailableProviders[provider.name]!)")
                usable.remove(kind)
            }
        }
        do {
            while !usable.isEmpty && !stop.isRequested {
                let batch: [Claimed]
                if let writer, writer.isClaiming {
                    let waitStarted = ContinuousClock.now
                    writer.drain() // the batch claimed ahead while the last one went out
                    countClaimWait(since: waitStarted)
                    // (A failure first: the batch stays with the writer, and is given back below.)
                    if let error = writer.error { logUnrecorded(writer.unrecordedSentIDs); throw error }
                    batch = writer.takeClaimed() ?? []
                } else {
                    // What was handed over (releases among it) is written first, so this claim can take it again.
                    if let writer {
                        writer.drain()
                        if let error = writer.error { logUnrecorded(writer.unrecordedSentIDs); throw error }
                    }
                    let claimStarted = ContinuousClock.now
                    batch = try claim(scope: scope, providers: usable, excluding: endpointsLeftOut(of: usable),
                                      limit: writer == nil ? batchSize : claimSizer.next())
                    timings.claims += ContinuousClock.now - claimStarted
                }
                if batch.isEmpty { break }
                report.claimed += batch.count
                try send(batch, scope: scope, usable: &usable, report: &report)
            }
        } catch {
            report.released += giveBackAfterFailure()
            throw error
        }
        // Tokens still held had no push of their provider and environment succeed beside them: their
        // answer may be our setup's (the fact sheet: drop them only when the configuration is known to be
        // good), so none is retired. Each is tried again later (an attempt, with backoff), and retired by the
        // first run in which a push to the same environment succeeds. A stop, or their provider stopped as
        // misconfigured, sends them back as they were.
        let recorder = makeRecorder()
        for (key, held) in suspects where !held.isEmpty {
            if stop.isRequested || !isSending(key, live: usable) {
                for h in held { recorder.release(h.claimed) }
                if stop.isRequested { report.released += held.count } else { report.held += held.count }
                continue
            }
            for h in held {
                let attempt = h.claimed.attempts + 1
                let why = "\(h.reason), and no push to \(key) succeeded in this run to show that the setup is right: token kept"
                if attempt >= maxAttempts {
                    recorder.settle(h.claimed, state: "dead", event: "dead", error: "\(why) (gave up after \(attempt) attempts)", status: h.status, attempts: attempt)
                    report.count(.dead, key.provider)
                } else {
                    recorder.settle(h.claimed, state: "retrying", event: "retried", error: why, status: h.status, attempts: attempt,
                                    nextAttempt: Date().addingTimeInterval(backoff.delay(afterAttempt: attempt, atLeast: nil)))
                    report.count(.retried, key.provider)
                }
            }
            let setting = key.provider == .apns ? "APNS_TOPIC and the token's environment" : "the FCM project of the service account"
            logger.warning("\(key): \(held.count) token(s) answered \(held[0].reason) and no push to \(key) succeeded in this run: not retired, tried again later (if every token answers this, check \(setting))")
        }
        suspects.removeAll()
        if let writer {
            // A batch claimed ahead that will not be sent now goes back at once.
            if writer.isClaiming {
                writer.drain()
                for claimed in writer.takeClaimed() ?? [] { recorder.release(claimed); report.claimed += 1; report.released += 1 }
            }
            writer.write(recorder, with: flush)
            writer.drain()
            report.tokensRetired += writer.takeRetired()
            if let error = writer.error {
                logUnrecorded(writer.unrecordedSentIDs)
                throw error
            }
            let busy = writer.timings
            logger.debug("database time off the engine's thread: claims \(busy.claims), outcome writes \(busy.writes) (side by side); in line: claims \(timings.claims); the pushes waited for a claim \(timings.claimWaitCount) times, \(timings.claimWaits) in all, for the writer \(timings.writeWaitCount) times, \(timings.writeWaits) in all\(cpuShare(since: scheduleAtStart))")
        } else {
            report.tokensRetired += try recorder.flush()
            logger.debug("database time: claims \(timings.claims), outcome writes \(flushTime.withLock { $0 })\(cpuShare(since: scheduleAtStart))")
        }
        report.stoppedBy = stop.requestedSignalName
        report.lostClaimsCounted = lostClaimsCounted.withLock { $0 }
        if let stoppedBy = report.stoppedBy { logger.notice("stopped by \(stoppedBy): \(report.released) claimed deliveries released for the next run") }
        return report
    }

    /// A run that fails gives back what it holds and has not sent: the suspects held to the end of the run (sent,
    /// but neither retired nor tried again: as a stop sends them back) and a batch claimed ahead. They stayed
    /// leased for the lease's length, and the next claim counted each as an attempt. Returns how many.
    private func giveBackAfterFailure() -> Int {
        let recorder = makeRecorder()
        var count = 0
        for held in suspects.values { for h in held { recorder.release(h.claimed); count += 1 } }
        suspects.removeAll()
        if let writer {
            writer.drain()
            for claimed in writer.takeClaimed() ?? [] { recorder.release(claimed); count += 1 }
        }
        guard count > 0 else { return 0 }
        do {
            if let writer { try writer.writeReleases(recorder, with: flush) } else { _ = try flush(recorder) }
        } catch {
            logger.warning("could not give back \(count) claimed deliveries (due again when their claim runs out): \(error)")
            return 0
        }
        return count
    }

    /// For the debug log: how long this thread (the one sending the pushes) was on a core since `start`, and
    /// how long it waited, runnable, for one: a run starved of CPU shows here, not in the database times.
    private func cpuShare(since start: ThreadSchedule?) -> String {
        guard let start, let spent = ThreadSchedule.current()?.since(start) else { return "" }
        return "; the pushing thread was on a core \(spent.running) and waited \(spent.waiting) for one"
    }

    /// The pushes stood still from `since` until now, waiting for a claim made ahead.
    private func countClaimWait(since: ContinuousClock.Instant) {
        timings.claimWaits += ContinuousClock.now - since
        timings.claimWaitCount += 1
    }

    /// Says, loudly, which pushes went out without their outcome being written (they will go again).
    private func logUnrecorded(_ sent: [Int]) {
        guard !sent.isEmpty else { return }
        logger.critical("could not record \(sent.count) pushes that were sent (they will be sent again when their claim runs out): deliveries \(sent.map(String.init).joined(separator: ","))")
    }

    /// Which group a token belongs to for the mass-retirement guard (looked up on every push that succeeds:
    /// hashed as two small values, with no string built).
    struct SuspectKey: Hashable, CustomStringConvertible {
        let provider: PushTarget.Provider
        let environment: PushTarget.APNsEnvironment?
        var description: String { provider.rawValue + "/" + (environment?.rawValue ?? "-") }
    }

    static func suspectKey(_ target: PushTarget) -> SuspectKey {
        SuspectKey(provider: target.provider, environment: target.apnsEnvironment)
    }

    static let suspectReasons: Set<String> = ["BadDeviceToken", "DeviceTokenNotForTopic", "SENDER_ID_MISMATCH"]

    /// The stopped endpoints of providers still sending: a claim leaves their deliveries out (a stopped
    /// provider is left out whole, by the queue's own column).
    private func endpointsLeftOut(of live: Set<PushTarget.Provider>) -> Set<SuspectKey> {
        Set(stoppedEndpoints.keys.filter { live.contains($0.provider) })
    }

    /// Whether pushes to this endpoint still go out in this run: its provider is live and it was not stopped.
    private func isSending(_ key: SuspectKey, live: Set<PushTarget.Provider>) -> Bool {
        live.contains(key.provider) && stoppedEndpoints[key] == nil
    }

    /// Stops the pushes to one endpoint for the run; the provider too once none of its endpoints is left.
    private func stopEndpoint(_ key: SuspectKey, reason: String, live: inout Set<PushTarget.Provider>) {
        stoppedEndpoints[key] = reason
        if OutboxEngine.endpoints(of: key.provider).allSatisfy({ stoppedEndpoints[$0] != nil }) {
            live.remove(key.provider)
            logger.error("\(key.provider.rawValue): stopping: \(reason)")
        } else {
            logger.error("\(key): stopping the pushes to this endpoint: \(reason)")
        }
    }

    /// Stops a provider as a whole for the run (78): its credentials refused, an answer without HTTP/2. A stop
    /// as suspect lifted later leaves it stopped.
    private func stopProvider(_ provider: PushTarget.Provider, reason: String, live: inout Set<PushTarget.Provider>,
                              report: inout DeliveryReport) {
        if providerStops[provider] == nil { providerStops[provider] = reason }
        guard live.contains(provider), let name = providers[provider]?.name else { return }
        live.remove(provider)
        report.brokenProviders[name] = reason
        logger.error("\(name): stopping: \(reason)")
    }

    /// The longest an endpoint is held for its provider's Retry-After: a later run tries again then, whatever
    /// the provider named (a broken header must not stop the pushes for a day).
    static let longestHold: TimeInterval = 3600

    /// The endpoints held now (0030's `endpoint_holds`), with until when and why.
    static func holds(on connection: Connection) throws -> [(endpoint: SuspectKey, until: Date, reason: String)] {
        try connection.query("SELECT endpoint, held_until, reason FROM endpoint_holds WHERE held_until > now() ORDER BY endpoint").compactMap { row in
            let endpoint: String = try row.decode(0)
            guard let key = allEndpoints.first(where: { $0.description == endpoint }) else { return nil }
            return (key, try row.decode(1), try row.decode(2))
        }
    }

    static let allEndpoints = [PushTarget.Provider.apns, .fcm, .webpush, .expo].flatMap(endpoints(of:))

    /// The setups pushes proved right within `confirmedSetupLife` (0035's `confirmed_setups`), by endpoint, and
    /// whether within the hour.
    static func confirmedSetups(on connection: Connection) throws -> [(endpoint: SuspectKey, setup: String, lately: Bool)] {
        try connection.query("""
            SELECT endpoint, setup, confirmed_at > now() - interval '1 hour' FROM confirmed_setups
             WHERE confirmed_at > now() - make_interval(secs => \(OutboxEngine.confirmedSetupLife))
            """).compactMap { row in
            let endpoint: String = try row.decode(0)
            guard let key = allEndpoints.first(where: { $0.description == endpoint }) else { return nil }
            return (key, try row.decode(1), try row.decode(2))
        }
    }

    /// Whether a delivery to `endpoint` in `scope` is due now.
    static func hasDue(_ endpoint: SuspectKey, scope: Scope, on connection: Connection) throws -> Bool {
        try connection.query("""
            SELECT EXISTS (SELECT 1 FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id JOIN device_tokens t ON t.id = d.device_token_id
                            WHERE \(DeliveryQueue.duePredicate) AND q.provider = \(endpoint.provider.rawValue)
                              AND (\(endpoint.environment?.rawValue)::text IS NULL OR t.apns_environment = \(endpoint.environment?.rawValue))
                              AND (\(scope.runID)::bigint IS NULL OR (SELECT n.job_run_id FROM notifications n WHERE n.id = d.notification_id) = \(scope.runID)::bigint))
            """).first!.decode(0)
    }

    /// Stops an endpoint for an outage (unreachable, or answering 5xx): the run says so (69, `said`), and a
    /// long-lived engine's runs leave it stopped for `outageMemory` too.
    private func stopForOutage(_ key: SuspectKey, reason: String, said: String, live: inout Set<PushTarget.Provider>,
                               report: inout DeliveryReport) {
        let name = providers[key.provider]!.name
        report.unavailableProviders[name] = report.unavailableProviders[name] ?? said
        stopEndpoint(key, reason: reason, live: &live)
        outages[key] = (reason, ContinuousClock.now + OutboxEngine.outageMemory)
    }

    /// Every endpoint a provider sends to, by environment: a provider all of whose endpoints are stopped
    /// stops for the run.
    static func endpoints(of provider: PushTarget.Provider) -> [SuspectKey] {
        switch provider {
        case .apns: [PushTarget.APNsEnvironment.production, .sandbox].map { SuspectKey(provider: .apns, environment: $0) }
        case .fcm, .webpush, .expo: [SuspectKey(provider: provider, environment: nil)]
        }
    }

    /// Retires the token and settles the delivery as failed. `sent`: the push went out (an attempt counts).
    private func retire(_ claimed: Claimed, reason: String, status: Int?, since: Date?, sent: Bool = true,
                        recorder: OutcomeRecorder, report: inout DeliveryReport) {
        recorder.settle(claimed, state: "failed", event: "retired", error: "device token retired: \(reason)", status: status,
                        attempts: claimed.attempts + (sent ? 1 : 0))
        recorder.retire(tokenID: claimed.tokenID, reason: reason, since: since, deliveryID: claimed.deliveryID)
        retiredTokens.insert(claimed.tokenID)
        report.count(.failed, claimed.target.provider)
        logger.info("\(claimed.target.provider.rawValue): token \(claimed.target.redacted) retired: \(reason)")
    }

    // MARK: - Claiming

    /// A claimed delivery with its message, as the claim read it. A class: it travels through the batch
    /// queue, the in-flight table and the recorder, and a copy costs one reference instead of a dozen.
    final class Claimed: @unchecked Sendable {
        let deliveryID: Int
        let attempts: Int
        let tokenID: Int
        let tokenRetired: Bool
        /// The token belongs to another user than the notification's now: it moved (the app signed somebody
        /// else in on the phone) after the delivery was queued, or while the job that queued it was recording.
        let tokenMoved: Bool
        /// A reminder that waited, for a mentor on a pause now (`pausedWhileWaiting`).
        let mentorPaused: Bool
        /// Claims of it that ended without an outcome (0031), included in `attempts`: each may have sent it.
        let lostClaims: Int
        /// Claims of it in a row that ended without an outcome, `lostClaims` included, since its last answer
        /// (0045). Above 0 it is in doubt, and goes out in a careful claim (`CarefulClaims`).
        let lostInARow: Int
        var inDoubt: Bool { lostInARow > 0 }
        let message: PushMessage
        let target: PushTarget
        /// `lease_until` as the claim set it (text, exact to the microsecond): the proof that the row
        /// is still this engine's when its outcome is written. A row whose lease ran out and was claimed
        /// again has another value, and this engine's late outcome for it is not written.
        let lease: String
        /// When the app last registered the token: a 410 older than this does not retire it.
        let tokenLastSeen: Date
        /// The last moment its push may start: a push may take the whole request timeout, and must not
        /// outlive the claim (measured from before the claim, so never late).
        let startBy: ContinuousClock.Instant
        /// The recipient's quiet hours (seconds after local midnight, and the zone), read only for a retry or a
        /// push that is late (see `OutboxEngine.lateAfter`): the jobs deferred the others when they decided.
        let quietHours: (start: Int, end: Int, zone: String)?
        /// The provider's credential generation it was last sent with (the engine's thread alone sets it).
        var sentWith = 0
        /// The engine's count of pushes started when this one started (the engine's thread alone sets it).
        var startedAs = 0

        init(deliveryID: Int, attempts: Int, tokenID: Int, tokenRetired: Bool, message: PushMessage, target: PushTarget,
             lease: String, tokenLastSeen: Date, startBy: ContinuousClock.Instant, quietHours: (start: Int, end: Int, zone: String)? = nil,
             tokenMoved: Bool = false, mentorPaused: Bool = false, lostClaims: Int = 0, lostBefore: Int = 0) {
            self.deliveryID = deliveryID
            self.lostClaims = lostClaims
            self.lostInARow = lostBefore + lostClaims
            self.attempts = attempts
            self.tokenID = tokenID
            self.tokenRetired = tokenRetired
            self.tokenMoved = tokenMoved
            self.mentorPaused = mentorPaused
            self.message = message
            self.target = target
            self.lease = lease
            self.tokenLastSeen = tokenLastSeen
            self.startBy = startBy
            self.quietHours = quietHours
        }
    }

    /// An outcome buffer for the connection that will write it.
    func makeRecorder() -> OutcomeRecorder {
        let recorder = OutcomeRecorder(connection: writer?.connection ?? outcomeConnection ?? connection)
        recorder.warn = { [logger] in logger.warning("\($0)") }
        return recorder
    }

    /// Without a writer: the connection outcomes are written on since the engine's own broke (`flush`).
    private var outcomeConnection: Connection?

    /// Claims the next batch of due deliveries to `providers`, none to an endpoint in `excluding` (one this
    /// run could not reach: its deliveries stay due for the next run, and are not claimed again and again).
    /// `ahead`: a claim made while a batch is on the wire.
    func claim(scope: Scope, providers: Set<PushTarget.Provider>, excluding: Set<SuspectKey> = [],
               limit usualLimit: Int? = nil, on connection: Connection? = nil, ahead: Bool = false) throws -> [Claimed] {
        let me = ObjectIdentifier(self)
        let carefulLimit = careful.limit(for: me, usual: usualLimit ?? batchSize)
        /// Another engine of the process is sending the deliveries in doubt: waits for it, then claims. (An empty
        /// claim would end this engine's run; a claim made ahead takes nothing, and the next in line waits.)
        func claimOnceTheOtherIsDone() throws -> [Claimed] {
            if ahead { return [] }
            waitWhileAnotherIsCareful(usual: usualLimit ?? batchSize)
            if stop.isRequested { return [] }
            return try claim(scope: scope, providers: providers, excluding: excluding, limit: usualLimit, on: connection, ahead: ahead)
        }
        if carefulLimit == 0 { return try claimOnceTheOtherIsDone() }
        let limit = carefulLimit ?? usualLimit ?? batchSize
        // A careful claim takes deliveries in doubt only: folded lost claims, or a lease left on the row.
        let onlyInDoubt: Query = carefulLimit == nil ? "" : " AND (q.lost_in_a_row > 0 OR q.lease_until IS NOT NULL)"
        let connection = connection ?? self.connection
        // `http(_:lease:)` keeps the request timeout at most half the lease: the rest is for starting, less a
        // tenth of the lease kept for recording the answer (the writer may be behind, a deadlock retried), so
        // a push's outcome is written while the claim on its row still holds.
        let startBy = ContinuousClock.now + .milliseconds(Int64(lease * 900)) - client.configuration.requestTimeout
        let kinds = PostgresArray(providers.map(\.rawValue).sorted())
        let runID = scope.runID
        // The one job run's deliveries, or every due one (then from the queue alone: it carries the
        // provider, and the scope has nothing to filter elsewhere). An APNs environment stopped for the run
        // (its host unreachable, its setup suspect) is left out by the token's environment: only then does
        // the claim look up the token of each due APNs row ahead of it.
        let stoppedAPNs = excluding.filter { $0.provider == .apns }.compactMap { $0.environment?.rawValue }.sorted()
        let leftOut: Query = stoppedAPNs.isEmpty ? "" : """
             AND (q.provider <> 'apns' OR NOT EXISTS (
                   SELECT 1 FROM deliveries sd JOIN device_tokens st ON st.id = sd.device_token_id
                    WHERE sd.id = q.delivery_id AND st.apns_environment = ANY(\(PostgresArray(stoppedAPNs))::text[])))
            """
        var floor = 0
        if let runID {
            if let known = runFloors.withLock({ $0[runID] }) {
                floor = known
            } else {
                // Once per run and engine: below the run's first delivery.
                floor = try connection.query("""
                    SELECT coalesce(min(d.id), 1) - 1 FROM notifications n JOIN deliveries d ON d.notification_id = n.id
                     WHERE n.job_run_id = \(runID)::bigint
                    """).first!.decode(0)
            }
        }
        // One run's deliveries: from the queue in id order above the run's floor, each row's run looked up by its
        // own keys (a join the planner could drive from the run's notifications instead, all of them, as it did).
        let due: Query = runID.map { runID in
            """
            SELECT q.ctid FROM delivery_queue q
             WHERE \(DeliveryQueue.duePredicate) AND q.provider = ANY(\(kinds)::text[]) AND q.delivery_id > \(floor)::bigint
               AND (SELECT n.job_run_id FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE d.id = q.delivery_id) = \(runID)::bigint\(leftOut)\(onlyInDoubt)
             ORDER BY q.delivery_id
             LIMIT \(limit)
             FOR UPDATE OF q SKIP LOCKED
            """
        } ?? """
            SELECT q.ctid FROM delivery_queue q
             WHERE \(DeliveryQueue.duePredicate) AND q.provider = ANY(\(kinds)::text[])\(leftOut)\(onlyInDoubt)
             ORDER BY q.next_attempt_at
             LIMIT \(limit)
             FOR UPDATE OF q SKIP LOCKED
            """
        // Read before the claim: a failure here leaves no row claimed for a lease to wait out.
        let presentations = try self.presentations(on: connection)
        // `q.ctid = ANY(ARRAY(…))` makes the update go straight to the rows the claim locked (a locked row
        // cannot move, and no index is searched again); joined as a set, the planner hashed whole tables on
        // every claim. The lease is in no index: a HOT update.
        // Rows in binary: the server formats no numbers or timestamps, and nothing is parsed here.
        // The claim and the fold of its lost claims (below) commit together: a fold that failed (a missing grant,
        // a lock, a timeout) left the rows leased with one more lost claim each, unsent, run after run, until
        // the fault was fixed and they were given up as dead without ever having been sent.
        var givenBack: [Claimed] = []
        var inDoubt = 0
        /// Rows in doubt found while another engine sends those: all given back, and this one waits.
        var refused = false
        let claimed: [Claimed] = try connection.transaction {
            let rows = try connection.query("""
                WITH due AS (\(due))
                UPDATE delivery_queue q SET lease_until = now() + make_interval(secs => \(lease)), lost_claims = q.lost_claims + (q.lease_until IS NOT NULL)::int
                  FROM deliveries d, notifications n, device_tokens t
                 WHERE q.ctid = ANY(ARRAY(SELECT ctid FROM due)) AND d.id = q.delivery_id
                   AND n.id = d.notification_id AND t.id = d.device_token_id
                RETURNING d.id, d.attempts + q.lost_claims, t.id, t.retired_at IS NOT NULL, t.provider, t.token, t.apns_environment,
                          n.id, n.category, n.title, n.body, n.data::text, n.expires_at,
                          (SELECT count(*) FROM notifications u WHERE u.user_id = n.user_id AND u.read_at IS NULL AND u.deleted_at IS NULL AND u.in_inbox),
                          q.lease_until::text, t.last_seen_at, n.critical, \(OutboxEngine.claimChecks), q.lost_claims, q.lost_in_a_row
                """, binary: true)
            let claimed = try rows.map { row in
                let provider = PushTarget.Provider(rawValue: try row.decode(4))!
                let environment = try row.decode(6, as: String?.self).flatMap(PushTarget.APNsEnvironment.init(rawValue:))
                let category: String = try row.decode(8)
                return Claimed(
                    deliveryID: try row.decode(0), attempts: try row.decode(1), tokenID: try row.decode(2), tokenRetired: try row.decode(3),
                    message: PushMessage(notificationID: try row.decode(7), category: category, title: try row.decode(9),
                                         body: try row.decode(10), data: try row.decode(11, as: JSONValue.self).stringMembers(),
                                         badge: try row.decode(13), expiresAt: try row.decode(12, as: Date?.self), timeSensitive: try row.decode(16),
                                         presentation: presentations[category]),
                    target: PushTarget(provider: provider, token: try row.decode(5), apnsEnvironment: environment),
                    lease: try row.decode(14), tokenLastSeen: try row.decode(15), startBy: startBy,
                    quietHours: try row.decode(17, as: String?.self).flatMap(OutboxEngine.quietHours), tokenMoved: try row.decode(18),
                    mentorPaused: try row.decode(19), lostClaims: try row.decode(20), lostBefore: try row.decode(21))
            }
            let lost = claimed.filter { $0.lostClaims > 0 }
            if !lost.isEmpty {
                // Claims that ended without an outcome are attempts now, in the delivery's own row and history: a
                // release or a postpone (which write no attempt) must not make such a push look never tried to what
                // reads `attempts` (a displacement for the daily cap, the cancels that free a slot, `waited`).
                // The queue rows first, in id order, as every other writer locks them (the outcome writes, the app's
                // cancels), then the deliveries: only rows still this claim's (a cancel may have taken one since).
                try connection.execute("""
                    WITH lost AS (
                        SELECT * FROM unnest(\(PostgresArray(lost.map(\.deliveryID)))::bigint[], \(PostgresArray(lost.map(\.lostClaims)))::int[],
                                             \(PostgresArray(lost.map(\.lease)))::text[]) AS l(id, n, lease)
                    ), locked AS (
                        SELECT q.delivery_id, l.n FROM delivery_queue q JOIN lost l ON l.id = q.delivery_id AND q.lease_until = l.lease::timestamptz
                         ORDER BY q.delivery_id FOR UPDATE OF q
                    ), reset AS (
                        UPDATE delivery_queue q SET lost_claims = 0, lost_in_a_row = q.lost_in_a_row + k.n FROM locked k WHERE q.delivery_id = k.delivery_id
                        RETURNING q.delivery_id AS id, k.n
                    ), folded AS (
                        UPDATE deliveries d SET attempts = d.attempts + r.n, updated_at = now() FROM reset r WHERE d.id = r.id
                        RETURNING d.id, d.attempts
                    )
                    INSERT INTO delivery_events (delivery_id, event, attempt, detail)
                    SELECT id, 'retried', attempts, \(OutboxEngine.lostClaimDetail) FROM folded
                    """)
                lostClaimsCounted.withLock { $0 += lost.reduce(0) { $0 + $1.lostClaims } }
            }
            let doubtful = claimed.filter(\.inDoubt)
            inDoubt = doubtful.count
            guard !doubtful.isEmpty else { return claimed }
            // Deliveries in doubt, and nothing else, go out now: the first few by id (the same ones in every run) of
            // those lost most often in a row, as many as `CarefulClaims` says; the rest of the claim goes back
            // unsent, as if never claimed (those in doubt stay so).
            let most = doubtful.map(\.lostInARow).max()!
            let size = careful.keep(for: me, lostInARow: most, ahead: ahead, usual: usualLimit ?? batchSize)
            refused = size == 0 && !ahead
            let kept = Set(doubtful.filter { $0.lostInARow == most }.map(\.deliveryID).sorted().prefix(size))
            givenBack = claimed.filter { !kept.contains($0.deliveryID) }
            if !givenBack.isEmpty {
                try connection.execute("""
                    UPDATE delivery_queue SET lease_until = NULL WHERE delivery_id = ANY(\(PostgresArray(givenBack.map(\.deliveryID).sorted()))::bigint[])
                    """)
            }
            return claimed.filter { kept.contains($0.deliveryID) }
        }
        if refused { return try claimOnceTheOtherIsDone() }
        if carefulLimit != nil && claimed.isEmpty && givenBack.isEmpty {
            // None in doubt left (or all held by other processes): claims as usual again.
            careful.end(for: me)
            return try claim(scope: scope, providers: providers, excluding: excluding, limit: usualLimit, on: connection, ahead: ahead)
        }
        if inDoubt > 0 && careful.firstTimeSaid() {
            let all: Int = (try? connection.query("""
                SELECT count(*) FROM delivery_queue q
                 WHERE \(DeliveryQueue.duePredicate) AND q.provider = ANY(\(kinds)::text[]) AND (q.lost_in_a_row > 0 OR q.lease_until IS NOT NULL)
                """).first?.decode(0)) ?? inDoubt
            logger.notice("\(max(all, inDoubt)) due deliveries are in doubt (claimed by a run that ended without recording their answers): they go out before the others, a few at a time (alone once lost three times in a row), so that a run that dies on one of them counts an attempt on those few only")
        }
        // A careful claim took rows in doubt only, not every row in id order: the floor stays (it skipped the
        // run's other rows below the ones it took, and with fewer than its limit all of the run's).
        if let runID, carefulLimit == nil {
            // A claim cut short by its limit may have left rows of the run above what it took; one that was not
            // went through all of them, and every row the run has yet to queue gets a higher id than any there is
            // now (its batches commit before they are delivered): the floor moves past all of today's ids, so a
            // claim that took nothing (the pushes deferred for quiet hours, a batch that queued none) does not
            // read the same rows again next time.
            // Rows given back (the claim found rows in doubt) are below it.
            let highest = claimed.count + givenBack.count < limit
                ? try connection.query("SELECT coalesce(max(id), 0) FROM deliveries").first!.decode(0, as: Int.self)
                : claimed.map(\.deliveryID).max() ?? floor
            let below = givenBack.map(\.deliveryID).min().map { $0 - 1 } ?? highest
            runFloors.withLock { $0[runID] = max($0[runID] ?? floor, min(highest, below)) }
        }
        return claimed
    }

    /// Waits (a twentieth of a second at a time) while another engine of the process sends the deliveries in
    /// doubt, or until a stop.
    private func waitWhileAnotherIsCareful(usual: Int) {
        let me = ObjectIdentifier(self)
        while careful.limit(for: me, usual: usual) == 0 && !stop.isRequested {
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// The history's word for a claim that ended without an outcome.
    static let lostClaimDetail = "claimed by a run that ended without recording an answer (it may have been sent): counted as an attempt"

    /// What a claimed delivery comes to before it is sent: the one chain of checks the run makes (`admit`) and
    /// the dry run's plan says (`DeliverRunner.plan`).
    enum Verdict {
        case cancelMoved, cancelPaused, settleRetired, giveUpUnrecorded(String), fail(String), retireMalformed(String), expire,
             cancelQuietPastExpiry(quietUntil: Date), postpone(until: Date), send
    }

    /// The verdict on a claimed delivery. `target` nil: a provider no job sends to (the plan's rows may hold one);
    /// `serving` nil: no APNs key to judge environments by.
    /// `attempts` counts the claims that ended without an outcome; `lostInARow`: those since its last answer
    /// (`Claimed.lostInARow`).
    static func verdict(moved: Bool, paused: Bool, retired: Bool, target: PushTarget?, serving: Set<PushTarget.APNsEnvironment>?,
                        expiresAt: Date?, quietHours: (start: Int, end: Int, zone: String)?, now: Date,
                        attempts: Int, lostInARow: Int, maxAttempts: Int) -> Verdict {
        if moved { return .cancelMoved }
        if paused { return .cancelPaused }
        if retired { return .settleRetired }
        if lostInARow > 0 && attempts >= maxAttempts {
            // A run that dies after sending (the same crash each time) would send it again every lease, for ever.
            return .giveUpUnrecorded("claimed \(lostInARow) time(s) by runs that ended without recording an answer, each of which may have sent it: given up after \(attempts) attempts (PUSH_MAX_ATTEMPTS), so that it is not sent again and again")
        }
        if let target {
            if let serving, let why = unserved(target.provider, target.apnsEnvironment, serving: serving) { return .fail(why) }
            if let malformation = target.malformation { return .retireMalformed(malformation) }
        }
        if let expiresAt, expiresAt <= now { return .expire }
        if let quiet = quietHours, let end = QuietHours.end(of: (quiet.start, quiet.end), at: now, zone: quiet.zone) {
            // Postponed past its expiry, it would expire unsent and unseen: a push-only notification was never in
            // the inbox. Cancelled now instead, it joins the inbox while it still holds, as the jobs list a push-only
            // row they would defer past its expiry (`inbox_only_quiet_hours`).
            if let expiresAt, end >= expiresAt { return .cancelQuietPastExpiry(quietUntil: end) }
            return .postpone(until: end)
        }
        return .send
    }

    /// The columns `verdict` needs from the database, in this order: the late push's quiet hours (`lateQuietHours`),
    /// whether the token moved to another user, whether the mentor's pause began while it waited; of a row of
    /// `delivery_queue q`, `deliveries d`, `notifications n` and `device_tokens t`.
    static let claimChecks: Query = "\(OutboxEngine.lateQuietHours), t.user_id <> n.user_id, \(OutboxEngine.pausedWhileWaiting)"

    /// The reason a delivery is cancelled when its token moves to another user (0025's trigger says the same).
    static let tokenMovedReason = "the device token moved to another user"

    /// Seconds past its due time after which a push that has not been tried is late: released in an outage, or
    /// held up behind a backlog. A late push, like a retry, waits out its recipient's quiet hours.
    static let lateAfter = 600

    /// A push that waited, of `delivery_queue q` and `deliveries d`: a retry, one released or held up past its
    /// time (`lateAfter`), or one the job deferred (due more than a minute after it was queued: the quiet hours).
    /// What the job judged may have changed meanwhile with nothing to say so: the recipient's quiet hours, or a
    /// pause saved in advance that has begun (a trigger runs when a pause is saved, none when it starts). A
    /// push that did not wait was judged moments ago, and the triggers have cancelled it if anything changed.
    static let waited: Query = """
        (d.attempts > 0 OR q.next_attempt_at < now() - make_interval(secs => \(OutboxEngine.lateAfter))
         OR q.next_attempt_at > d.created_at + interval '1 minute')
        """

    /// A push that waited (`waited`) may now fall in the recipient's quiet hours (the jobs deferred the others
    /// when they decided, and the window may have moved since): their window, "start end zone", for such a row
    /// of `delivery_queue q`, `deliveries d` and `notifications n`; NULL for any other.
    static let lateQuietHours: Query = """
        CASE WHEN NOT n.critical AND \(OutboxEngine.waited)
             THEN (SELECT extract(epoch FROM coalesce(pc.quiet_hours_start, op.quiet_hours_start))::int || ' ' ||
                          extract(epoch FROM coalesce(pc.quiet_hours_end, op.quiet_hours_end))::int || ' ' || \(Recipient.knownTimeZone)
                     FROM users u
                     LEFT JOIN push_notification_configs pc ON pc.user_id = u.id
                     LEFT JOIN organization_delivery_policies op ON op.organization_id = u.organization_id
                    WHERE u.id = n.user_id)
        END
        """

    /// Whether a reminder that waited (`waited`) is for a mentor on a pause now: the reminders a pause cancels
    /// (0024's `pauses_cancel_reminders`), of a row of `delivery_queue q`, `deliveries d` and `notifications n`.
    static let pausedWhileWaiting: Query = """
        CASE WHEN n.category IN ('inactivity', 'assignment_follow_up') AND \(OutboxEngine.waited)
             THEN EXISTS (SELECT 1 FROM availability_pauses p
                           WHERE p.mentor_id = n.user_id AND p.starts_at <= now() AND (p.ends_at IS NULL OR p.ends_at > now()))
             ELSE false
        END
        """

    /// The reason a reminder is cancelled when its mentor's pause began while it waited (0024's trigger says the same).
    static let pausedReason = "a pause of the mentor started before the push went out"

    /// The reason a waiting push is cancelled when its recipient's quiet hours last past its expiry (`verdict`).
    static let quietPastExpiryReason = "the recipient's quiet hours last past its expiry: a push-only notification joins the inbox instead"

    /// "start end zone" as the claim reads a recipient's quiet hours.
    static func quietHours(_ text: String) -> (start: Int, end: Int, zone: String)? {
        let parts = text.split(separator: " ", maxSplits: 2)
        guard parts.count == 3, let start = Int(parts[0]), let end = Int(parts[1]) else { return nil }
        return (start, end, String(parts[2]))
    }

    /// How the phone presents each category (the `notification_categories` rows: channel, sound, thread),
    /// read once per run: a category without a row gets the fallback.
    private func presentations(on connection: Connection) throws -> [String: PushMessage.Presentation] {
        if let loaded = presentationsLoaded.withLock({ $0 }) { return loaded }
        var loaded: [String: PushMessage.Presentation] = [:]
        for row in try connection.query("SELECT category, android_channel_id, sound, apns_thread_id FROM notification_categories") {
            loaded[try row.decode(0)] = PushMessage.Presentation(androidChannel: try row.decode(1), sound: try row.decode(2), apnsThread: try row.decode(3))
        }
        presentationsLoaded.withLock { $0 = loaded }
        return loaded
    }

    // MARK: - Sending

    /// Sends `batch`, and with a writer the batches it claims ahead as this one runs low, keeping the
    /// window full; outcomes are recorded as they complete.
    func send(_ batch: [Claimed], scope: Scope, usable: inout Set<PushTarget.Provider>, report: inout DeliveryReport) throws {
        var recorder = makeRecorder()
        var queue: [Claimed] = []
        /// The next in `queue` to send.
        var index = 0
        /// Settles what cannot be sent at all, and queues the rest.
        func admit(_ rows: [Claimed]) {
            // What was sent leaves the queue: a run that drains a large backlog claims batch after batch.
            if index >= 4096 {
                queue.removeFirst(index)
                index = 0
            }
            let now = Date()
            for claimed in rows {
                let verdict = OutboxEngine.verdict(moved: claimed.tokenMoved, paused: claimed.mentorPaused,
                                                   retired: claimed.tokenRetired || retiredTokens.contains(claimed.tokenID),
                                                   target: claimed.target, serving: apnsEnvironments,
                                                   expiresAt: claimed.message.expiresAt, quietHours: claimed.quietHours, now: now,
                                                   attempts: claimed.attempts, lostInARow: claimed.lostInARow, maxAttempts: maxAttempts)
                switch verdict {
                case .cancelMoved:
                    // Never to another person's phone. The app's move cancels what is queued when it commits; a
                    // job recording at that moment queued on the token as it saw it, after that cancel.
                    recorder.cancel(claimed, reason: OutboxEngine.tokenMovedReason)
                    report.cancelled += 1
                case .cancelPaused:
                    // A pause saved in advance began while the push waited: cancelled as a pause saved now cancels it.
                    recorder.cancel(claimed, reason: OutboxEngine.pausedReason)
                    report.cancelledPaused += 1
                case .settleRetired:
                    recorder.settle(claimed, state: "failed", event: "failed", error: "device token retired", status: nil)
                    report.count(.failed, claimed.target.provider)
                case .giveUpUnrecorded(let why):
                    recorder.settle(claimed, state: "dead", event: "dead", error: why, status: nil)
                    report.count(.dead, claimed.target.provider)
                    report.deadAfterLostClaims += 1
                    logger.warning("delivery \(claimed.deliveryID): \(why)")
                case .fail(let why):
                    // Never sent, and no reason to stop that environment for the run: the key cannot serve it.
                    recorder.settle(claimed, state: "failed", event: "failed", error: why, status: nil)
                    report.count(.failed, claimed.target.provider)
                case .retireMalformed(let malformation):
                    // Never sent, never a reason to stop the provider: this token alone is retired.
                    retire(claimed, reason: "malformed token: \(malformation)", status: nil, since: nil, sent: false, recorder: recorder, report: &report)
                case .expire:
                    recorder.settle(claimed, state: "expired", event: "expired", error: "expired before it could be sent", status: nil)
                    report.count(.expired, claimed.target.provider)
                case .cancelQuietPastExpiry:
                    recorder.cancel(claimed, reason: OutboxEngine.quietPastExpiryReason)
                    report.cancelledQuietPastExpiry += 1
                case .postpone(let end):
                    // A push that waited, inside its recipient's quiet hours, waits for the window to end, as the jobs
                    // defer a push they decide in it; no attempt counted. (One that expires first expires then.)
                    recorder.postpone(claimed, until: end)
                    report.postponed += 1
                case .send:
                    queue.append(claimed)
                }
            }
        }
        admit(batch)
        var exhausted = false
        var leaseReleased = 0
        var lastFlush = ContinuousClock.now
        var resend: [Claimed] = []
        /// The pushes on the wire, by delivery.
        var inFlight: [Int: Claimed] = [:]
        var resent = Set<Int>()
        var failure: Error?
        /// Since when the pushes have had nothing to send while a claim runs.
        var waitingForClaimSince: ContinuousClock.Instant?
        var live = usable
        /// What was claimed and not sent goes back, due at once, no attempt counted.
        func releaseRest() -> Int {
            let rest = resend + queue[index...]
            for claimed in rest { recorder.release(claimed) }
            resend.removeAll()
            index = queue.count
            return rest.count
        }

        /// Since when the pushes have waited for the writer to catch up.
        var waitingForWriterSince: ContinuousClock.Instant?
        /// Hands the outcomes gathered to the writer (or writes them) when that is due: `flushEvery` of them, or
        /// `flushInterval` since the last time. With a writer: while it is free (so outcomes gather into fewer,
        /// larger writes when it is busy), or every flushInterval, or at most maxPendingOutcomes at a time.
        func handOverIfDue() {
            guard failure == nil && (recorder.pending >= flushEvery || ContinuousClock.now - lastFlush >= flushInterval) else { return }
            if let writer {
                if writer.isIdle || ContinuousClock.now - lastFlush >= flushInterval || recorder.pending >= maxPendingOutcomes {
                    writer.write(recorder, with: flush)
                    recorder = makeRecorder()
                    lastFlush = ContinuousClock.now
                }
            } else {
                do { report.tokensRetired += try flush(recorder) } catch { failure = error }
                lastFlush = ContinuousClock.now
            }
        }
        client.run(next: {
            if failure == nil, let error = writer?.error { failure = error }
            // After an answer from the provider's side, one push at a time until another kind of answer comes.
            if !serverFailuresInARow.isEmpty && !inFlight.isEmpty { return nil }
            if let writer, failure == nil, !stop.isRequested, writer.isBehind(maxQueuedWrites) {
                // The writer is behind: nothing new goes out until it catches up. With answers still to come the
                // client goes on reading them (it asks again after each); with none, this thread waits here, a
                // quarter second at a time so that a stop is seen. Never while answers wait to be read: libcurl
                // would time them out, and pushes the provider took would be sent again.
                waitingForWriterSince = waitingForWriterSince ?? ContinuousClock.now
                if !inFlight.isEmpty { return nil }
                while !stop.isRequested && !writer.waitForWrites(atMost: maxQueuedWrites, timeout: .milliseconds(250)) {}
            }
            if let since = waitingForWriterSince {
                timings.writeWaits += ContinuousClock.now - since
                timings.writeWaitCount += 1
                waitingForWriterSince = nil
            }
            if stop.isRequested {
                // Stop: nothing new goes out.
                report.released += releaseRest()
                return nil
            }
            if let writer, failure == nil {
                // Claim the next batch on the writer's connection while this one still has half a batch to go.
                if let more = writer.takeClaimed() {
                    if let since = waitingForClaimSince {
                        countClaimWait(since: since)
                        waitingForClaimSince = nil
                    }
                    if more.isEmpty { exhausted = true } else { report.claimed += more.count; admit(more) }
                } else if !exhausted && !writer.isClaiming && queue.count - index < claimSizer.size / 2 && !careful.isCareful {
                    // (Not while the claims find deliveries in doubt: each careful claim's outcomes are written first.)
                    let providers = live
                    let excluding = endpointsLeftOut(of: live)
                    let limit = claimSizer.next()
                    writer.requestClaim { [unowned self] in
                        try self.claim(scope: scope, providers: providers, excluding: excluding, limit: limit, on: writer.claimConnection, ahead: true)
                    }
                }
            }
            while failure == nil {
                let claimed: Claimed
                if !resend.isEmpty { claimed = resend.removeFirst() }
                else if index < queue.count { claimed = queue[index]; index += 1 }
                else {
                    if waitingForClaimSince == nil, writer?.isClaiming == true { waitingForClaimSince = ContinuousClock.now }
                    return nil
                }
                if cancels?.cancelled(claimed.deliveryID) == true {
                    // The app cancelled it after the claim (0038): its row is settled, and nothing is written here.
                    report.withdrawn += 1
                    continue
                }
                guard isSending(OutboxEngine.suspectKey(claimed.target), live: live), let provider = providers[claimed.target.provider] else {
                    recorder.release(claimed)
                    report.held += 1
                    continue
                }
                if retiredTokens.contains(claimed.tokenID) {
                    recorder.settle(claimed, state: "failed", event: "failed", error: "device token retired", status: nil)
                    report.count(.failed, claimed.target.provider)
                    continue
                }
                // The tag finds the delivery again when its answer comes. Made before the check below: making
                // it may wait for credentials (FCM's token endpoint).
                var request = provider.request(claimed.message, target: claimed.target, tag: claimed.deliveryID)
                // A push started now may take the whole request timeout: start none that could outlive its claim
                // (the client checks again when it starts one that waited for a new connection).
                request.startBy = claimed.startBy
                if ContinuousClock.now > claimed.startBy {
                    recorder.release(claimed)
                    leaseReleased += 1
                    continue
                }
                claimed.sentWith = provider.credentialGeneration
                startedPushes += 1
                claimed.startedAs = startedPushes
                inFlight[claimed.deliveryID] = claimed
                return request
            }
            return nil
        }, completed: { request, result in
            guard let claimed = inFlight.removeValue(forKey: request.tag), let provider = providers[claimed.target.provider] else { return }
            if case .failure(let error) = result, error.kind == .notStarted {
                // Never sent: back to the queue, no attempt counted.
                recorder.release(claimed)
                leaseReleased += 1
                return
            }
            claimSizer.completedOne()
            let status = (try? result.get())?.status
            var outcome = provider.classify(result)
            if case .success(let response) = result, response.withoutHTTP2 {
                // Not the provider's HTTP/2 (the fact sheet: fail hard): the provider stops for the run (78). An answer
                // that is the provider's own is recorded as any other (the push was sent: released unrecorded, it
                // went again every run); any other (a proxy's 502) costs no attempt.
                let why = "\(HTTP2Client.origin(request.url)) answered without HTTP/2 (ALPN did not negotiate h2: a proxy in between, or not the provider's server; check the endpoint setting and PUSH_CA_FILE)"
                if case .retry = outcome { outcome = .credentialsBroken(reason: why) }
                stopProvider(claimed.target.provider, reason: why, live: &live, report: &report)
            }
            if case .reauthenticate = outcome, !live.contains(claimed.target.provider) {
                // The provider already stopped for the run (its fresh credentials could not be had): the rest
                // of the window's 401s wait for the next run, with no credentials asked for again.
                recorder.release(claimed)
                report.held += 1
                return
            }
            if case .reauthenticate(let reason) = outcome {
                // Sent with a credential already replaced (many were in flight when the first such answer
                // came): send again with the new one; else get a fresh one (once per delivery).
                let stale = claimed.sentWith < provider.credentialGeneration
                var fresh = stale
                var refreshFailure: PushOutcome?
                /// Refreshing was not allowed: the credentials called expired are younger than the floor (APNs: 20 minutes).
                var tooYoung = false
                if !resent.contains(claimed.deliveryID) && !stale {
                    do throws(PushOutcomeError) {
                        fresh = try provider.refreshCredentials()
                        tooYoung = !fresh
                    } catch { refreshFailure = error.outcome }
                }
                if fresh && !resent.contains(claimed.deliveryID) {
                    resent.insert(claimed.deliveryID)
                    resend.append(claimed)
                    if !stale { logger.notice("\(provider.name): \(reason): fresh credentials, sending again") }
                    return
                }
                switch refreshFailure {
                case nil where tooYoung:
                    // None were made: credentials made minutes ago and called expired mean the clocks disagree.
                    outcome = .credentialsBroken(reason: "\(reason) for credentials made less than 20 minutes ago, so none were made again (at most every 20 minutes): this host's clock and the provider's disagree (check NTP), or the key's team/project is wrong")
                case nil:
                    outcome = .credentialsBroken(reason: "\(reason), and fresh credentials did not cure it (check the key, the team/project and the clock)")
                case .credentialsBroken(let why)?:
                    // Fresh credentials cannot be had: the service account itself is refused.
                    outcome = .credentialsBroken(reason: "\(reason), and fresh credentials could not be had: \(why)")
                case let other?:
                    // Nor for now: the token endpoint is down or slow, which is no configuration problem.
                    outcome = .unreachable(reason: "\(reason), and fresh credentials could not be had for now: \(other.reason)")
                }
            }
            // A 5xx, or no answer: the provider's side (a 429 or IdleTimeout is one device's or one connection's).
            let fromProviderSide: Bool = { if case .retry = outcome { return (status ?? 500) >= 500 } else { return false } }()
            if !fromProviderSide && !serverFailuresInARow.isEmpty {
                // Any other answer shows the provider's side up again.
                serverFailuresInARow[OutboxEngine.suspectKey(claimed.target)] = nil
            }
            let attempt = claimed.attempts + 1
            switch outcome {
            case .delivered(let messageID):
                recorder.settle(claimed, state: "sent", event: "sent", error: nil, status: status, messageID: messageID, attempts: attempt)
                report.count(.sent, claimed.target.provider)
                let key = OutboxEngine.suspectKey(claimed.target)
                if confirmedThisRun.insert(key).inserted && !provenLately.contains(key) {
                    recorder.confirm(key.description, setup: provider.setup(of: key.environment))
                }
                if confirmed.insert(key).inserted, let held = suspects.removeValue(forKey: key) {
                    for h in held { retire(h.claimed, reason: h.reason, status: h.status, since: nil, recorder: recorder, report: &report) }
                }
                if stoppedAsSuspect.remove(key) != nil, let why = brokenEndpoints.removeValue(forKey: key) {
                    // Stopped as misconfigured while this push was on its way: the setup is right after all, and the
                    // endpoint's pushes go on, unless the provider stopped as a whole meanwhile. The run's 78 says
                    // what else is still stopped, if anything.
                    stoppedEndpoints[key] = nil
                    if providerStops[key.provider] == nil { live.insert(key.provider) }
                    if report.brokenProviders[provider.name] == why {
                        report.brokenProviders[provider.name] = providerStops[key.provider]
                            ?? brokenEndpoints.first(where: { $0.key.provider == key.provider })?.value
                    }
                    logger.notice("\(key): a push succeeded after all: the setup is right, its pushes go on")
                }
            case .retry(let after, let reason):
                if fromProviderSide {
                    // An endpoint that names when to come back, or fails this many times in a row, stops for the run;
                    // its pushes not yet sent go back, due for the next run, with no attempt counted.
                    let key = OutboxEngine.suspectKey(claimed.target)
                    // Only a connection that broke (not a timeout, each push's own) takes its window down as one.
                    let broke: Bool = { if case .failure(let error) = result { return error.kind == .broken } else { return false } }()
                    let sameBreak = broke && claimed.startedAs <= noAnswerCountedUpTo[key, default: 0]
                    let inARow = serverFailuresInARow[key, default: 0] + (sameBreak ? 0 : 1)
                    serverFailuresInARow[key] = max(inARow, 1)
                    if broke && !sameBreak { noAnswerCountedUpTo[key] = startedPushes }
                    if isSending(key, live: live), ((after ?? 0) > 0 && status != nil) || inARow >= serverFailureLimit {
                        serverFailuresInARow[key] = nil
                        if let after, after > 0, let status {
                            // Every later run too, until then (a run a minute later sent again, whatever was asked).
                            recorder.hold(key.description, until: Date().addingTimeInterval(min(after, OutboxEngine.longestHold)),
                                          reason: "answered \(status) \(reason) with Retry-After \(Int(after)) s")
                        }
                        let why = after.flatMap { $0 > 0 ? "answered \(status.map(String.init) ?? "") \(reason) with Retry-After \(Int($0)) s: its other pushes wait for the next run" : nil }
                            ?? "\(inARow) answers in a row from the provider's side, the last \(status.map { "\($0) " } ?? "")\(reason): its other pushes wait for the next run"
                        stopForOutage(key, reason: why, said: "\(key) \(why)", live: &live, report: &report)
                    }
                }
                if attempt >= maxAttempts {
                    recorder.settle(claimed, state: "dead", event: "dead", error: "\(reason) (gave up after \(attempt) attempts)", status: status, attempts: attempt)
                    report.count(.dead, claimed.target.provider)
                } else {
                    let delay = backoff.delay(afterAttempt: attempt, atLeast: after)
                    recorder.settle(claimed, state: "retrying", event: "retried", error: reason, status: status, attempts: attempt,
                                    nextAttempt: Date().addingTimeInterval(delay))
                    report.count(.retried, claimed.target.provider)
                }
            case .tokenDead(let reason, let since?) where since < claimed.tokenLastSeen:
                // APNs's 410 says the token stopped working at `since`, but the app registered it again after
                // that: the token is kept, and only this push is given up.
                let why = "\(reason) as of \(Timestamp.iso8601(since)), but the app registered the token again since (\(Timestamp.iso8601(claimed.tokenLastSeen))): token kept"
                recorder.settle(claimed, state: "failed", event: "failed", error: why, status: status, attempts: attempt)
                report.count(.failed, claimed.target.provider)
                logger.info("\(claimed.target.provider.rawValue): token \(claimed.target.redacted) kept: \(why)")
            case .tokenDead(let reason, let since):
                let key = OutboxEngine.suspectKey(claimed.target)
                if OutboxEngine.suspectReasons.contains(reason), !confirmed.contains(key), provenEarlier.contains(key) {
                    if retiredOnEarlierProof[key, default: 0] + (suspects[key]?.count ?? 0) + 1 < suspectLimit {
                        retiredOnEarlierProof[key, default: 0] += 1
                        retire(claimed, reason: reason, status: status, since: since, recorder: recorder, report: &report)
                        break
                    }
                    // Too many for an earlier run's proof to vouch for, with no success in this one: the proof is
                    // withdrawn, and the rest are held as with none.
                    provenEarlier.remove(key)
                    recorder.withdrawProof(key.description)
                    logger.warning("\(key): \(retiredOnEarlierProof[key, default: 0] + 1) tokens answered \(reason) with no push succeeding in this run: the setup proved in an earlier run is no longer taken as proven")
                }
                guard OutboxEngine.suspectReasons.contains(reason), !confirmed.contains(key) else {
                    retire(claimed, reason: reason, status: status, since: since, recorder: recorder, report: &report)
                    break
                }
                guard isSending(key, live: live) || stoppedAsSuspect.contains(key) else { // already stopped, for another reason
                    recorder.release(claimed)
                    report.held += 1
                    break
                }
                suspects[key, default: []].append((claimed, reason, status))
                if suspects[key]!.count >= suspectLimit && !stoppedAsSuspect.contains(key) {
                    // Our setup for this environment is suspect (78): only its pushes stop, none is retired. Those
                    // held stay held until the end of the run: a success still on its way proves the setup right,
                    // and retires them (released at once, they headed the next run's claim and stopped it again).
                    let why = "\(suspects[key]!.count) tokens in a row answered \(reason) and none succeeded: the \(key) environment, topic or project is probably wrong, so no token was retired"
                    report.brokenProviders[provider.name] = report.brokenProviders[provider.name] ?? why
                    brokenEndpoints[key] = why
                    stopEndpoint(key, reason: why, live: &live)
                    stoppedAsSuspect.insert(key)
                }
            case .rejected(let reason):
                recorder.settle(claimed, state: "dead", event: "dead", error: "rejected: \(reason)", status: status, attempts: attempt)
                report.count(.dead, claimed.target.provider)
            case .credentialsBroken(let reason):
                // Our setup: the provider stops for the run (78); the push waits, no attempt counted. A host our TLS
                // setup cannot verify, or an endpoint setting libcurl cannot use, is that endpoint's alone: APNs's
                // sandbox host behind an intercepting proxy is no reason to hold production's pushes (it stopped both).
                report.credentialsRefused = true
                if case .failure(let error) = result, error.kind == .untrusted || error.kind == .unusableURL {
                    let key = OutboxEngine.suspectKey(claimed.target)
                    if isSending(key, live: live) {
                        report.brokenProviders[provider.name] = report.brokenProviders[provider.name] ?? "\(key) \(reason)"
                        stopEndpoint(key, reason: reason, live: &live)
                    }
                } else {
                    stopProvider(claimed.target.provider, reason: reason, live: &live, report: &report)
                }
                recorder.release(claimed)
                report.held += 1
            case .unreachable(let reason, let holdFor):
                // No connection to this endpoint: its pushes stop for the run (69), the others of the provider
                // go on (APNs's sandbox host down is no reason to hold production's pushes); the push waits,
                // no attempt counted, due at once for the next run, or once the hold the provider asked for ends.
                let key = OutboxEngine.suspectKey(claimed.target)
                if isSending(key, live: live) {
                    if let holdFor {
                        recorder.hold(key.description, until: Date().addingTimeInterval(min(holdFor, OutboxEngine.longestHold)), reason: reason)
                    }
                    stopForOutage(key, reason: reason, said: reason, live: &live, report: &report)
                }
                recorder.release(claimed)
                report.held += 1
            case .environmentRefused(let reason):
                // Our setup for this APNs environment (a key restricted to the other one): only its pushes stop
                // for the run (78), the other environment's go on; the push waits, no attempt counted.
                let key = OutboxEngine.suspectKey(claimed.target)
                if isSending(key, live: live) {
                    report.brokenProviders[provider.name] = report.brokenProviders[provider.name] ?? "\(key): \(reason)"
                    brokenEndpoints[key] = "\(key): \(reason)"
                    stopEndpoint(key, reason: reason, live: &live)
                }
                recorder.release(claimed)
                report.held += 1
            case .platformCredentialsBroken(let reason):
                // A configuration alarm (78), but only pushes to such tokens are refused: the provider's others go on.
                // This one is tried again in an hour (released, it headed every minute's claim and was refused again),
                // an attempt each time, so that it does not wait for ever: dead after PUSH_MAX_ATTEMPTS. Refused this
                // many times with none of the endpoint's pushes succeeding (an app with no Android users), the
                // endpoint stops for the run.
                let key = OutboxEngine.suspectKey(claimed.target)
                if report.platformAlarms[provider.name] == nil { logger.error("\(provider.name): \(reason)") }
                report.platformAlarms[provider.name] = report.platformAlarms[provider.name] ?? reason
                if attempt >= maxAttempts {
                    recorder.settle(claimed, state: "dead", event: "dead", error: "\(reason) (gave up after \(attempt) attempts)", status: status, attempts: attempt)
                    report.count(.dead, claimed.target.provider)
                } else {
                    recorder.settle(claimed, state: "retrying", event: "retried", error: reason, status: status, attempts: attempt,
                                    nextAttempt: Date().addingTimeInterval(OutboxEngine.platformCredentialsWait))
                    report.count(.retried, claimed.target.provider)
                }
                report.waitingForSetup += 1
                platformRefusals[key, default: 0] += 1
                if platformRefusals[key]! >= suspectLimit, !confirmed.contains(key), isSending(key, live: live) {
                    stopEndpoint(key, reason: "\(platformRefusals[key]!) pushes in a row refused for the platform's credential, none succeeded", live: &live)
                }
            case .reauthenticate:
                break // handled above
            }
            handOverIfDue()
        }, tick: {
            // In a lull (the answers of a window came together, one is slow), what was answered is recorded
            // within flushInterval, not when the next answer comes: until then a crash sends it again.
            if recorder.pending > 0 { handOverIfDue() }
        })
        usable = live
        if leaseReleased > 0 { logger.notice("the claim on \(leaseReleased) deliveries was running out: released, due again at once") }
        report.released += leaseReleased
        if let writer {
            // What is left of this batch is written in turn; a failure shows at the next batch or the end.
            if let failure { report.released += releaseRest(); logger.warning("stopping: \(failure)") }
            writer.write(recorder, with: flush)
            if let failure {
                writer.drain()
                logUnrecorded(writer.unrecordedSentIDs)
                throw writer.error ?? failure
            }
            return
        }
        if let failure {
            // What was not started goes back; one last try to record what was sent, then give up loudly.
            report.released += releaseRest()
            do {
                report.tokensRetired += try flush(recorder)
            } catch {
                logUnrecorded(recorder.sentIDs)
                throw failure
            }
            logger.warning("recording outcomes failed once and then succeeded: \(failure)")
        }
        report.tokensRetired += try flush(recorder)
    }

    /// Writes the recorder's outcomes (`flushRetryingConflicts`), on a new connection when its own breaks.
    private func flush(_ recorder: OutcomeRecorder) throws -> Int {
        let started = ContinuousClock.now
        defer { flushTime.withLock { $0 += ContinuousClock.now - started } }
        guard writer == nil else { return try flushRetryingConflicts(recorder) } // the writer renews its connection
        // Without a writer (a scenario job, event-notify): a connection that breaks is replaced, and the same
        // write made again, as push-deliver's writer does (`OutboxWriter.renewing`): the pushes sent were otherwise
        // sent again once their lease ran out. The claims that follow fail on the broken one, and the run ends.
        var current = recorder.connection
        defer { if current !== connection { outcomeConnection = current } }
        return try OutboxWriter.renewing(&current, reconnect: { [connection, logger] in
            logger.notice("the connection the outcomes are written on broke: writing them on a new one")
            return try connection.sibling(applicationName: "mentor-push outcomes")
        }) { fresh in
            recorder.connection = fresh
            return try flushRetryingConflicts(recorder)
        }
    }

    /// Writes the recorder's outcomes, trying again (up to three times, backing off) on a deadlock or a
    /// serialization failure: another engine writing the same rows.
    private func flushRetryingConflicts(_ recorder: OutcomeRecorder) throws -> Int {
        var delay = 0.1
        var attempt = 1
        while true {
            do {
                return try recorder.flush()
            } catch let error as PostgresError where attempt < 4 && (error.sqlState ?? "").hasPrefix("40") {
                logger.warning("recording outcomes: \(error); trying again")
                Thread.sleep(forTimeInterval: delay)
                delay *= 4
                attempt += 1
            }
        }
    }
}

/// Exponential backoff with full jitter: 30 s, 1 min, 2 min … capped at an hour.
struct Backoff {
    var base: TimeInterval = 30
    var cap: TimeInterval = 3600

    func delay(afterAttempt attempt: Int) -> TimeInterval {
        let ceiling = min(cap, base * pow(2, Double(max(0, attempt - 1))))
        return ceiling / 2 + Double.random(in: 0...(ceiling / 2))
    }

    /// The delay when the provider named the earliest retry (`Retry-After`, or FCM's one-minute minimum
    /// for a quota): that is the first step, and the steps still double, so a device over its quota
    /// again and again waits longer each time instead of the same minute every time. Capped as every step is,
    /// at ``cap`` (an hour, as long as the endpoint is held at most): a `Retry-After` of a day put the one push
    /// it answered off for a day while the others went an hour later.
    func delay(afterAttempt attempt: Int, atLeast asked: TimeInterval?) -> TimeInterval {
        guard let asked else { return delay(afterAttempt: attempt) }
        let minimum = min(asked, cap)
        return max(minimum, Backoff(base: max(base, minimum), cap: max(cap, minimum)).delay(afterAttempt: attempt))
    }
}
