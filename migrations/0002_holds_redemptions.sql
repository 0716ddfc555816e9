-- Holds, payment, release, expiry and redemption (issue 5).

-- Units whose claim left an active status (released or expired) and whose return to the Redis
-- gate is still to be confirmed: written in the same transaction as the claim's change and
-- `campaigns.remaining + n`. The request or sweep that made the change gives the unit back to
-- the gate right after its commit; the sweeper gives it back again (a no-op unless that first
-- attempt was lost: origin crash, Redis down, a gate load racing the return) once the row is a
-- few seconds old, then deletes the row. A give-back acts only while the customer's gate
-- holder still names this claim, so a unit goes back at most once.
CREATE TABLE gate_returns (
    claim_id     text PRIMARY KEY,
    campaign_id  text NOT NULL,
    customer_id  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_returns_created ON gate_returns (created_at);

-- The POS Idempotency-Key of each redeem and the reply it got, so the same key gets the same
-- reply again (also after a restart). One row per key; a key is bound to the code it was first
-- used with.
CREATE TABLE redeem_requests (
    idempotency_key  text PRIMARY KEY,
    code             text NOT NULL,
    status           smallint NOT NULL,
    body             text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
