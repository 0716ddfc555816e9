-- Campaigns, claims and the claim ledger. PostgreSQL is the truth; Redis is a gate rebuilt
-- from these tables.

CREATE TABLE campaigns (
    id            text PRIMARY KEY CHECK (id ~ '^[a-z0-9-]{1,64}$'),
    name          text NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('sale', 'giveaway')),
    -- total units
    stock         bigint NOT NULL CHECK (stock BETWEEN 1 AND 10000000),
    -- units not held, paid, issued or redeemed; the record that decides every claim
    remaining     bigint NOT NULL CHECK (remaining >= 0 AND remaining <= stock),
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL,
    hold_seconds  integer CHECK (hold_seconds IS NULL OR hold_seconds > 0),
    paused        boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (starts_at < ends_at),
    CHECK ((kind = 'sale') = (hold_seconds IS NOT NULL))
);

CREATE TABLE claims (
    id               text PRIMARY KEY,
    campaign_id      text NOT NULL REFERENCES campaigns (id),
    customer_id      text NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('held', 'paid', 'released', 'expired', 'issued', 'redeemed')),
    held_until       timestamptz,
    -- giveaway coupon code (12 symbols of the 32-symbol alphabet)
    code             text UNIQUE,
    payment_ref      text,
    redeemed_at      timestamptz,
    -- the customer's Idempotency-Key of the claim request and the fingerprint of that request
    -- (SHA-256 of campaign and body), so a retry is recognised even after Redis lost its state
    idempotency_key  text NOT NULL,
    request_fp       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- One active claim per customer and campaign: the backstop behind the Redis gate.
CREATE UNIQUE INDEX claims_one_active_per_customer
    ON claims (campaign_id, customer_id)
    WHERE status IN ('held', 'paid', 'issued', 'redeemed');
CREATE INDEX claims_customer_key ON claims (customer_id, idempotency_key);
CREATE INDEX claims_held_until ON claims (held_until) WHERE status = 'held';
CREATE INDEX claims_campaign_created ON claims (campaign_id, created_at);

-- Append-only history of claim events: when, by whom, why. Never updated or deleted
-- (enforced by the trigger below).
CREATE TABLE ledger (
    seq          bigserial PRIMARY KEY,
    claim_id     text NOT NULL,
    campaign_id  text NOT NULL,
    customer_id  text NOT NULL,
    event        text NOT NULL
                 CHECK (event IN ('claimed', 'paid', 'released', 'expired', 'issued', 'redeemed')),
    actor        text NOT NULL,
    reason       text,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_claim ON ledger (claim_id);
CREATE INDEX ledger_campaign ON ledger (campaign_id, seq);

CREATE FUNCTION ledger_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only';
END $$;
CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION ledger_is_append_only();
