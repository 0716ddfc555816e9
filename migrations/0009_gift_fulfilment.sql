-- Gift fulfilment (docs/GIFTS.md): gift campaigns, segments each carrying one gift, subscribers
-- assigned to a segment, frequency caps as rows, the idempotency records of fulfilment
-- requests, an append-only ledger of grants, the outbox of provider calls, and the audit
-- trail of managers' gift writes. Every time is timestamptz (UTC); money is integer minor units.

CREATE TABLE gift_campaigns (
    -- 1..=64 of [A-Za-z0-9_-] (e.g. WORLDCUP_2026)
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    starts_at   timestamptz NOT NULL,
    ends_at     timestamptz NOT NULL,
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'closed')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);

-- A segment of a campaign carries one gift: `amount` minor units of ISO 4217 `currency`.
CREATE TABLE gift_segments (
    campaign_id text NOT NULL REFERENCES gift_campaigns (id),
    id          text NOT NULL CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
    amount      bigint NOT NULL CHECK (amount > 0),
    currency    text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    kind        text NOT NULL DEFAULT 'mobile_credit' CHECK (kind IN ('mobile_credit')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign_id, id)
);

-- Cap rules as rows: at most `max_grants` grants per sliding window of `per_days` days, for
-- a subscriber of the segment. A segment may have several; every one must pass. One rule per
-- window length per segment.
CREATE TABLE gift_cap_rules (
    campaign_id text NOT NULL,
    segment_id  text NOT NULL,
    max_grants  integer NOT NULL CHECK (max_grants BETWEEN 1 AND 1000),
    per_days    integer NOT NULL CHECK (per_days BETWEEN 1 AND 3660),
    PRIMARY KEY (campaign_id, segment_id, per_days),
    FOREIGN KEY (campaign_id, segment_id) REFERENCES gift_segments (campaign_id, id)
);

-- Segment assignments: a subscriber (MSISDN, E.164 digits without '+') is in at most one
-- segment of a campaign.
CREATE TABLE gift_members (
    campaign_id text NOT NULL,
    msisdn      text NOT NULL CHECK (msisdn ~ '^[0-9]{8,15}$'),
    segment_id  text NOT NULL,
    PRIMARY KEY (campaign_id, msisdn),
    FOREIGN KEY (campaign_id, segment_id) REFERENCES gift_segments (campaign_id, id)
);

-- The fulfilment ledger: one row per grant, a fact that happened. Append-only (trigger
-- below). `(campaign_id, idempotency_key)` unique: one grant per request is a database
-- invariant, whatever the application did before the INSERT.
CREATE TABLE gift_ledger (
    id              uuid PRIMARY KEY,
    campaign_id     text NOT NULL REFERENCES gift_campaigns (id),
    segment_id      text NOT NULL,
    msisdn          text NOT NULL CHECK (msisdn ~ '^[0-9]{8,15}$'),
    idempotency_key text NOT NULL,
    amount          bigint NOT NULL CHECK (amount > 0),
    currency        text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    kind            text NOT NULL CHECK (kind IN ('mobile_credit')),
    -- the campaign clock's "now" when granted (PostgreSQL's clock; see gift_now)
    created_at      timestamptz NOT NULL,
    CONSTRAINT gift_ledger_one_grant_per_request UNIQUE (campaign_id, idempotency_key),
    FOREIGN KEY (campaign_id, segment_id) REFERENCES gift_segments (campaign_id, id)
);
-- The cap check reads a subscriber's grants by time.
CREATE INDEX gift_ledger_subscriber ON gift_ledger (campaign_id, msisdn, created_at);

CREATE FUNCTION gift_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER gift_ledger_append_only BEFORE UPDATE OR DELETE ON gift_ledger
    FOR EACH ROW EXECUTE FUNCTION gift_is_append_only();
CREATE TRIGGER gift_ledger_no_truncate BEFORE TRUNCATE ON gift_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION gift_is_append_only();

-- Idempotency records of fulfilment requests: the first reply of a request, grant or refusal,
-- kept byte for byte (status and body) under its key, with the subscriber it was for; a
-- refusal has no fulfilment.
CREATE TABLE gift_requests (
    campaign_id     text NOT NULL REFERENCES gift_campaigns (id),
    idempotency_key text NOT NULL,
    msisdn          text NOT NULL,
    fulfilment_id   uuid UNIQUE REFERENCES gift_ledger (id),
    status          smallint NOT NULL,
    body            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign_id, idempotency_key)
);

-- The outbox of provider calls: one row per grant, written in the grant's transaction, and
-- the delivery state the relay moves: pending → delivered, or failed after the last attempt.
CREATE TABLE gift_outbox (
    fulfilment_id   uuid PRIMARY KEY REFERENCES gift_ledger (id),
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- a pending row is due from this time (a relay that takes it pushes it by its lease)
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    provider_ref    text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
CREATE INDEX gift_outbox_due ON gift_outbox (next_attempt_at) WHERE status = 'pending';
CREATE INDEX gift_outbox_failed ON gift_outbox (created_at) WHERE status = 'failed';

-- Managers' gift writes: who (the admin token's name), what, the parameters, when.
CREATE TABLE gift_audit (
    seq          bigserial PRIMARY KEY,
    campaign_id  text NOT NULL REFERENCES gift_campaigns (id),
    actor        text NOT NULL,
    action       text NOT NULL CHECK (action IN ('create_campaign', 'create_segment',
                                                 'set_caps', 'add_members', 'retry_delivery')),
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX gift_audit_campaign ON gift_audit (campaign_id, seq);
CREATE TRIGGER gift_audit_append_only BEFORE UPDATE OR DELETE ON gift_audit
    FOR EACH ROW EXECUTE FUNCTION gift_is_append_only();

-- A movable clock for tests: when the origin runs with FLASHGATE_GIFT_TEST_CLOCK, the
-- campaign's "now" is the `now_at` of its row here (if any). Never read otherwise.
CREATE TABLE gift_test_clock (
    campaign_id text PRIMARY KEY REFERENCES gift_campaigns (id),
    now_at      timestamptz NOT NULL
);

-- The campaign clock: PostgreSQL's clock (clock_timestamp(), UTC), or the test clock's time
-- of the campaign when `test_clock` is true and one is set.
CREATE FUNCTION gift_now(campaign text, test_clock boolean) RETURNS timestamptz
    LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN test_clock
                THEN coalesce((SELECT now_at FROM gift_test_clock WHERE campaign_id = campaign),
                              clock_timestamp())
                ELSE clock_timestamp() END
$$;
