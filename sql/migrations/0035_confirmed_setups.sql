-- 0035: a push that succeeded proves its endpoint's setup right for later runs too.
--
-- BadDeviceToken, DeviceTokenNotForTopic and SENDER_ID_MISMATCH can mean the token is bad or that our topic,
-- environment or project is wrong: a token so answered is retired only once a push to the same endpoint has
-- succeeded (the mass-retirement guard). That proof lasted one run. A retry that ran alone, in a minute with
-- no other push, never had a success beside it: the token was never retired, and every later notification to
-- it spent PUSH_MAX_ATTEMPTS requests that Apple asks not to make. A run whose first 20 answers were such
-- tokens stopped the endpoint as misconfigured, run after run, though pushes had just succeeded.
--
-- A run's first success on an endpoint writes the setup it proves (the host and topic, or the FCM project);
-- later runs with the same setup take it as proven for 7 days. A changed setting is another setup, proven
-- afresh. Written last in an outcome write's transaction (after its queue rows), so it closes no circle.
CREATE TABLE confirmed_setups (
    endpoint     text NOT NULL CHECK (endpoint IN ('apns/production', 'apns/sandbox', 'fcm/-', 'webpush/-', 'expo/-')),
    setup        text NOT NULL,
    confirmed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, setup)
);
