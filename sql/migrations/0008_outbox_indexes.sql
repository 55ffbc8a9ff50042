-- 0008: one index less to maintain on every outbox write.
--
-- Each push updates its delivery twice (the claim's lease, then the outcome), and neither update can be
-- a HOT update (the lease moves next_attempt_at, the outcome moves the row out of the open states), so
-- every index on deliveries costs an insertion per update. deliveries_token_open_idx duplicated
-- deliveries_token_idx for the rare settling of a retired token's open deliveries, which the full index
-- serves as well (a token has few deliveries). Measured with make bench-outbox.
DROP INDEX IF EXISTS deliveries_token_open_idx;
