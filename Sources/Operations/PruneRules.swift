import Foundation
import Postgres

/// What `prune` may delete, as SQL conditions shared by the real run and `--dry-run`, so the counts a dry
/// run prints are the rows a real run would take. The rules run in this order, which is what keeps every
/// foreign key satisfied:
///
/// 1. `decisions` past `decisionsDays` (nothing references a decision).
/// 2. `notifications` read or deleted (or push only: never listed in the inbox, so never read there) and past
///    `inboxDays`, or expired more than `expiredDays` ago, with no delivery still open (queued: `pending`,
///    `retrying`; found through the queue, whose rows are the open deliveries since 0015, because `state` is in
///    no index: with the night's deferred pushes queued and the statistics behind, the planner compared every
///    candidate with every open delivery, 80 s a batch) and no delivery event younger than the database's floor,
///    except the records the scenarios' own rules read (``onceEverScenarios``, and each user's latest
///    inactivity reminder, from which the next one is timed):
///    each goes with its deliveries and their events, and the decisions that made it keep their reason and
///    dedupe key but lose the link (`notification_id` set to NULL).
/// 3. `delivery_events` past `eventsDays` (the deliveries stay, with their final state and last error).
/// 4. `device_tokens` retired more than `tokenGraceDays` ago that no delivery references any more (their
///    deliveries go with their notifications in rule 2).
///    A retired token past the grace that a kept delivery still references (one of the records below, kept
///    for ever) keeps its row but loses its value: the token is replaced by `pruned:<id>`, so a device's
///    identifier is not kept for ever with it.
/// 4b. `daily_push_slots` of a local day more than a week past (the slot of a notification kept for ever
///    went only with it).
/// 5. `job_runs` past `runsDays`, finished, that no decision and no notification references any more
///    (`events.job_run_id` is not a foreign key; event-notify prunes its own processed events).
///
/// Each condition reads the table under the alias its rule names (`dc`, `t`, `e`, `k`, `r`).
struct PruneRules {
    let settings: PruneSettings

    /// Decisions (alias `dc`) past their retention.
    var decision: Query { "dc.decided_at < now() - make_interval(days => \(settings.decisionsDays))" }

    /// A decision (alias `dc`) below which the age rule deletes (`Pruner.simple`'s `youngest`): one young enough to
    /// stay, and not dated ahead of the clock. A run with `--now` in the future (allowed before stop 23 refused
    /// it) dates its decisions then: the first of them held every later decision from pruning until that date
    /// came and went. Such a row is kept until it is old itself; the rows after it are not.
    var decisionThatStays: Query { "NOT (\(decision)) AND dc.decided_at <= now() + interval '1 day'" }

    /// A decision (alias `dc`) the real run deletes: past its retention and below the first that stays (a dry
    /// run, which deletes nothing, counts with it).
    var decisionGone: Query {
        "\(decision) AND dc.id < coalesce((SELECT min(dc.id) FROM decisions dc WHERE \(decisionThatStays)), 9223372036854775807)"
    }

    /// Notifications (alias `t`) that may go, with everything that hangs on them.
    var notification: Query {
        """
        ((t.read_at IS NOT NULL OR t.deleted_at IS NOT NULL OR NOT t.in_inbox) AND t.created_at < now() - make_interval(days => \(settings.inboxDays))
         OR t.expires_at < now() - make_interval(days => \(settings.expiredDays)))
        AND split_part(t.dedupe_key, ':', 1) NOT IN (\(sql: PruneRules.onceEverScenarios))
        AND NOT (t.category = 'inactivity' AND t.created_at = (SELECT max(l.created_at) FROM notifications l
                                                                WHERE l.user_id = t.user_id AND l.category = 'inactivity'))
        AND NOT EXISTS (SELECT 1 FROM deliveries od JOIN delivery_queue oq ON oq.delivery_id = od.id WHERE od.notification_id = t.id)
        AND NOT EXISTS (SELECT 1 FROM deliveries yd JOIN delivery_events ye ON ye.delivery_id = yd.id
                         WHERE yd.notification_id = t.id AND ye.at > now() - make_interval(days => \(PruneSettings.eventsFloorDays)))
        """
    }

    /// The scenarios whose "once ever" rule reads their own notifications (by dedupe key): a row of theirs is the
    /// only record that the thing was said, so it is kept (read or deleted, it stays out of the user's sight).
    /// Pruning it would let the next run say it again: a follow-up every 30 days, a milestone or an
    /// honorarium twice, a recomputed impact summary announced again.
    static let onceEverScenarios: StaticString = "'assignment_follow_up', 'impact_summary', 'milestone', 'honorarium'"

    /// Daily push slots (alias `s`) of a day long past: a slot counts only toward its own local day's cap (and a
    /// push waiting past midnight still holds yesterday's), so a week on it counts toward nothing.
    var slot: Query { "s.local_day < (current_date - make_interval(days => \(PruneRules.slotDays)))::date" }
    static let slotDays = 7

    /// Delivery events (alias `e`) past their retention.
    var event: Query { "e.at < now() - make_interval(days => \(settings.eventsDays))" }

    /// Retired tokens (alias `k`) past the grace period; `afterEarlierRules` counts the deliveries rule 2
    /// would delete as already gone (for a dry run, which deletes nothing).
    func token(afterEarlierRules: Bool) -> Query {
        let referenced: Query = afterEarlierRules
            ? "EXISTS (SELECT 1 FROM deliveries kd JOIN notifications t ON t.id = kd.notification_id WHERE kd.device_token_id = k.id AND NOT coalesce((\(notification)), false))"
            : "EXISTS (SELECT 1 FROM deliveries kd WHERE kd.device_token_id = k.id)"
        return "k.retired_at < now() - make_interval(days => \(settings.tokenGraceDays)) AND NOT \(referenced)"
    }

    /// Retired tokens (alias `k`) past the grace period whose value is still there (rule 4 deleted those no
    /// delivery references).
    var tokenValue: Query {
        "k.retired_at < now() - make_interval(days => \(settings.tokenGraceDays)) AND k.token NOT LIKE 'pruned:%'"
    }

    /// Finished runs (alias `r`) past their retention; `afterEarlierRules` as for `token`.
    func run(afterEarlierRules: Bool) -> Query {
        let referenced: Query = afterEarlierRules
            ? """
              (EXISTS (SELECT 1 FROM decisions dc WHERE dc.job_run_id = r.id AND NOT coalesce((\(decisionGone)), false))
               OR EXISTS (SELECT 1 FROM notifications t WHERE t.job_run_id = r.id AND NOT coalesce((\(notification)), false)))
              """
            : """
              (EXISTS (SELECT 1 FROM decisions dc WHERE dc.job_run_id = r.id)
               OR EXISTS (SELECT 1 FROM notifications t WHERE t.job_run_id = r.id))
              """
        return "r.started_at < now() - make_interval(days => \(settings.runsDays)) AND r.outcome NOT IN ('running') AND NOT \(referenced)"
    }
}
