-- The relay finds due deliveries endpoint by endpoint through webhook_deliveries_due_of_endpoint
-- (0015), which also serves the queue depth (the pending rows). The older index over
-- next_attempt_at alone serves no query; it only cost every delivery row's insert and both of
-- its updates (the lease and the settling) one more index entry, on the claim path's cores.
DROP INDEX webhook_deliveries_due;
