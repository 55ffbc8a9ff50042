-- 0002: the delivery-event log, and when a delivery was sent.
--
-- delivery_events is append-only: one row per thing that happened to a delivery (sent, retried,
-- failed, dead, expired, retired = its device token was retired). A trigger refuses updates and deletes.

ALTER TABLE deliveries ADD COLUMN sent_at timestamptz;

CREATE TABLE delivery_events (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      bigint NOT NULL REFERENCES deliveries (id),
    event            text NOT NULL CHECK (event IN ('sent', 'retried', 'failed', 'dead', 'expired', 'retired')),
    attempt          integer NOT NULL,
    provider_status  integer,
    detail           text,
    at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX delivery_events_delivery_idx ON delivery_events (delivery_id);

CREATE FUNCTION delivery_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'delivery_events is append-only' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER delivery_events_no_change BEFORE UPDATE OR DELETE ON delivery_events
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_events_append_only();

-- Deliveries still to be sent to a token, for settling them when the token is retired.
CREATE INDEX deliveries_token_open_idx ON deliveries (device_token_id) WHERE state IN ('pending', 'retrying');
