-- 0021: the APNs provider token, shared by every process that sends with the same key.
--
-- Apple: "APNs reports an error if you recreate your tokens more than once every 20 minutes"
-- (429 TooManyProviderTokenUpdates). push-deliver runs every minute and every scenario job sends too; each
-- process used to mint its own token, so one key showed APNs a new token every minute (libraries' users
-- report exactly this error from several servers or pods minting their own). Now the first process to
-- need a token stores it here, and every other process, on this host or another, sends the same one until
-- it is 50 minutes old or APNs calls it expired; a process that finds a usable one never mints.
--
-- The token is a bearer credential for up to an hour, so it is stored sealed: AES-GCM under a key derived
-- (HKDF-SHA256) from the APNs signing key itself, bound to the team, key id and issue time. Reading this
-- table gives nothing that can send a push without the .p8 key, which can mint tokens anyway. A row
-- sealed by another key (the key was rotated) or damaged is replaced by the next process that needs one.
CREATE TABLE apns_provider_tokens (
    team_id    text NOT NULL,
    key_id     text NOT NULL,
    issued_at  timestamptz NOT NULL,
    sealed     bytea NOT NULL,
    PRIMARY KEY (team_id, key_id)
);
