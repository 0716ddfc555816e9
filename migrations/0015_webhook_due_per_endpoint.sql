-- The webhook relay takes due deliveries endpoint by endpoint (at most a few per endpoint at
-- once, none of an endpoint whose calls are still in flight), so one slow or dead receiver
-- costs only its own deliveries. This index serves that per-endpoint look-up.
CREATE INDEX webhook_deliveries_due_of_endpoint ON webhook_deliveries (endpoint_id, next_attempt_at)
    WHERE status = 'pending';
