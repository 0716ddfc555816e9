-- Every claim writes one delivery row per enabled endpoint subscribed to its event, in the
-- claim's own commit transaction (origin/src/webhooks/events.rs). The two foreign keys of
-- webhook_deliveries ran a trigger query per row at that insert: the event's key (a row the
-- same statement had just written) and the endpoint's, a `FOR KEY SHARE` lock on one row that
-- every committing transaction shares: about 27 µs of the ~61 µs a delivery row added to the
-- claim's statement (EXPLAIN ANALYZE, docs/BENCHMARKS.md). What they guarded is kept:
-- - the rows are written from the events and endpoints they name, in the same statement,
--   which locks those endpoints `FOR KEY SHARE` once per statement (not once per row), so an
--   endpoint cannot be deleted under it;
-- - events are never deleted;
-- - deleting an endpoint deletes its deliveries itself, in a later statement of its
--   transaction (origin/src/webhooks/endpoints.rs), as the cascade did.
ALTER TABLE webhook_deliveries
    DROP CONSTRAINT webhook_deliveries_event_id_fkey,
    DROP CONSTRAINT webhook_deliveries_endpoint_id_fkey;
