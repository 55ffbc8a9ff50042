import Foundation
import HTTP2
import JobKit
import Logging
import Postgres
import Push
import ScenarioEngine

/// Delivers a scenario job's new notifications right after it records them, when APNs or FCM is
/// configured; otherwise they wait as pending deliveries for `push-deliver`.
public final class ScenarioDelivery: JobDelivery {
    let options: DeliveryOptions
    private var settings: PushSettings?
    /// Kept while its database connection is the same, so a long-running job (event-notify) reuses its
    /// provider credentials and HTTP/2 connections batch after batch instead of opening new ones.
    private var engine: (connection: ObjectIdentifier, engine: OutboxEngine)?
    /// What every delivery of this run did so far: a long-running job (event-notify) delivers batch after batch,
    /// and its summary and metrics count them all.
    private var total = DeliveryReport()
    private var saidNotConfigured = false
    /// A provider refused the credentials: read them again before the next delivery if their files changed
    /// since (a fresh engine starts without what the last one learnt: connections, the outage memory,
    /// confirmed setups; unchanged files would be refused again).
    private var credentialsRefused = false
    /// The key files as they were when read (`PushSettings.credentialFilesNow`).
    private var loadedFiles: [String] = []
    private var saidWarnings = false

    /// Pushes what a job recorded even once asked to stop (event-notify: a committed batch's pushes go out,
    /// as promised, instead of waiting for push-deliver). A scheduled job's run may have queued far more, and
    /// leaves them to push-deliver when stopped.
    let finishesOnStop: Bool

    public init(options: DeliveryOptions, finishesOnStop: Bool = false) {
        self.options = options
        self.finishesOnStop = finishesOnStop
    }

    public func prepare() throws {
        settings = try PushSettings.load(options)
        loadedFiles = settings?.credentialFilesNow ?? []
    }

    public private(set) var failedSoFar: String?

    public func deliver(runID: Int, connection: Connection, logger: Logger) throws -> DeliveryResult? {
        // This call's: a failure before the engine runs (its sibling connections refused) must not report an earlier
        // failure's counts, which a service's pushes since had outgrown.
        failedSoFar = nil
        if credentialsRefused, let loaded = settings, loaded.credentialFilesNow != loadedFiles {
            // Credentials refused last time: the files are read again, as they are now (a service account's key
            // rotated in place, its old key revoked), with a fresh engine. A long-running job kept what it started
            // with until a restart, while push-deliver, a new process each minute, sent with the new ones.
            credentialsRefused = false
            if let reloaded = try? PushSettings.load(options) { settings = reloaded; loadedFiles = reloaded.credentialFilesNow }
            engine = nil
        }
        if let settings, !saidWarnings {
            for warning in settings.warnings { logger.warning("\(warning)") }
            saidWarnings = true
        }
        guard let settings, settings.isConfigured else {
            // Once per process: event-notify asks after every batch.
            if !saidNotConfigured {
                logger.notice("push is not configured (APNS_* or FCM_SERVICE_ACCOUNT_FILE): deliveries stay pending for push-deliver")
                saidNotConfigured = true
            }
            return nil
        }
        let engine: OutboxEngine
        if let kept = self.engine, kept.connection == ObjectIdentifier(connection) {
            engine = kept.engine
        } else {
            settings.apnsTokens?.share(through: PostgresAPNsTokenStore(siblingOf: connection, logger: logger))
            engine = try OutboxEngine(connection: connection, settings: settings, lease: OutboxEngine.defaultLease, logger: logger)
            // The app's cancels of the pushes it claims (0038), heard on a connection of its own for the engine's life.
            self.engine?.engine.cancels?.stop()
            engine.cancels = try CancelListener(siblingOf: connection, logger: logger)
            if finishesOnStop { engine.stop = .never }
            self.engine = (ObjectIdentifier(connection), engine)
        }
        let report: DeliveryReport
        do {
            report = try engine.run(scope: .jobRun(runID))
        } catch {
            // What went out before it failed counts for the run: a service (event-notify) reconnects and delivers on,
            // and its summary and metrics lost the pushes of a delivery cut off by a lost connection.
            total.add(engine.lastReport)
            failedSoFar = total.json
            throw error
        }
        credentialsRefused = credentialsRefused || report.credentialsRefused
        total.add(report)
        return DeliveryResult(json: total.json, sentence: report.sentence, status: report.exitStatus, stoppedBy: report.stoppedBy)
    }
}

extension DeliveryReport {
    /// 78 when a provider's credentials or configuration stopped it, 69 when one could not be reached.
    public var exitStatus: ExitStatus {
        if !brokenProviders.isEmpty || !platformAlarms.isEmpty { return .config }
        if !unavailableProviders.isEmpty { return .unavailable }
        return .ok
    }
}
