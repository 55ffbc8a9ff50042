-- 0005: a device token that could not be a real one is refused where it enters.
--
-- A token is appended to the APNs request path and sent in the FCM body: a row such as
-- '../../v1/projects/x/messages:send' would redirect an authenticated request, and CR, LF or spaces
-- break the request. The rules (the same as PushTarget.malformation in Sources/Push, which checks
-- tokens where they leave):
--   APNs: hexadecimal, an even number of characters, 64 to 200 (32 bytes today; Apple allows for longer)
--   FCM:  URL-safe base64 characters and ':' only, 20 to 4096 characters
-- NOT VALID: rows written before this migration are not scanned here (no long lock on a big table);
-- push-deliver retires each malformed one it meets, with the reason, without sending it.
ALTER TABLE device_tokens ADD CONSTRAINT device_tokens_token_format CHECK (
    CASE provider
        WHEN 'apns' THEN token ~ '^[0-9A-Fa-f]+$' AND length(token) BETWEEN 64 AND 200 AND length(token) % 2 = 0
        WHEN 'fcm' THEN token ~ '^[A-Za-z0-9_:-]+$' AND length(token) BETWEEN 20 AND 4096
        ELSE true
    END) NOT VALID;
