-- 0030: a provider's Retry-After holds its endpoint across runs.
--
-- A 5xx with a Retry-After stops its endpoint (APNs production or sandbox, FCM) for the run, and the pushes
-- not yet sent go back with no attempt counted. push-deliver runs every minute, so the next run sent again a
-- minute later, whatever the provider had asked: Google says to honour Retry-After ("senders that cause
-- problems risk being denylisted"). The run that is told to wait now writes the endpoint's hold here, and
-- every run (push-deliver, the scenario jobs, event-notify) leaves the endpoint's pushes waiting until then.
-- One row an endpoint, replaced by the next hold; an operator who knows better deletes it.
CREATE TABLE endpoint_holds (
    endpoint text PRIMARY KEY CHECK (endpoint IN ('apns/production', 'apns/sandbox', 'fcm/-', 'webpush/-', 'expo/-')),
    held_until timestamptz NOT NULL,
    reason text NOT NULL,
    held_at timestamptz NOT NULL DEFAULT now()
);
