-- Signed lifecycle webhooks (docs/WEBHOOKS.md): the endpoints managers register, the outbox of
-- events (written in the transaction of the change itself), one delivery row per (event,
-- endpoint) that the relay moves, and the audit trail of endpoint writes. Times are timestamptz
-- (UTC).

-- A receiver: where events of `event_types` are sent, signed with `secret` (`whsec_` + base64
-- of 24..=64 random bytes). After a rotation the previous secret still signs (a second
-- signature) until `previous_secret_until`.
CREATE TABLE webhook_endpoints (
    id                    uuid PRIMARY KEY,
    url                   text NOT NULL CHECK (length(url) BETWEEN 1 AND 2000),
    description           text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    event_types           text[] NOT NULL CHECK (cardinality(event_types) >= 1),
    enabled               boolean NOT NULL DEFAULT true,
    secret                text NOT NULL,
    previous_secret       text,
    previous_secret_until timestamptz,
    -- why it was disabled by the relay (a 410), NULL otherwise
    disabled_reason       text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- The outbox of events: one row per change, never updated. `object_kind` and `object_id` name
-- the object the event is about (a claim, a campaign); `sequence` increases by one per event of
-- one object, so a receiver can drop an older event that arrives after a newer one.
CREATE TABLE webhook_events (
    id           uuid PRIMARY KEY,
    type         text NOT NULL,
    campaign_id  text,
    object_kind  text NOT NULL CHECK (object_kind IN ('claim', 'campaign')),
    object_id    text NOT NULL,
    sequence     integer NOT NULL CHECK (sequence >= 1),
    occurred_at  timestamptz NOT NULL DEFAULT now(),
    payload      jsonb NOT NULL,
    CONSTRAINT webhook_events_one_sequence UNIQUE (object_kind, object_id, sequence)
);
CREATE INDEX webhook_events_time ON webhook_events (occurred_at);

-- One delivery of an event to an endpoint, written with the event for every enabled endpoint
-- subscribed to its type: pending → delivered, or failed after the last attempt.
CREATE TABLE webhook_deliveries (
    event_id        uuid NOT NULL REFERENCES webhook_events (id),
    endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- a pending row is due from this time (a relay that takes it pushes it by its lease)
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    last_attempt_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    PRIMARY KEY (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_of_endpoint ON webhook_deliveries (endpoint_id, created_at);

-- Managers' endpoint writes and the relay's disabling of an endpoint (a 410): who, what, when.
-- No foreign key: the trail outlives a deleted endpoint.
CREATE TABLE webhook_audit (
    seq          bigserial PRIMARY KEY,
    endpoint_id  uuid NOT NULL,
    actor        text NOT NULL,
    action       text NOT NULL CHECK (action IN ('create', 'change', 'delete', 'rotate_secret',
                                                 'disabled_by_receiver', 'replay')),
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX webhook_audit_endpoint ON webhook_audit (endpoint_id, seq);
CREATE TRIGGER webhook_audit_append_only BEFORE UPDATE OR DELETE ON webhook_audit
    FOR EACH ROW EXECUTE FUNCTION gift_is_append_only();
