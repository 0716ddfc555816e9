-- The delivery history of outboxes (docs/GIFTS.md, "Delivery history"): one row per provider
-- call and per change of a delivery's course, never updated or deleted. Keyed by the outbox
-- (`outbox`, the table's short name: 'gift' for gift_outbox; other outboxes add their name to
-- the check) and the outbox row's id, so that any outbox can keep its history here. The
-- outbox row keeps only the current state (status, attempts of the current round); this
-- table keeps how it got there, through a manager's retries.
CREATE TABLE delivery_attempts (
    -- the order of the history (bigserial: increasing in insertion order)
    seq        bigserial PRIMARY KEY,
    outbox     text NOT NULL CHECK (outbox IN ('gift')),
    outbox_id  uuid NOT NULL,
    -- what happened:
    --   delivered  a call answered with a receipt (answer: the provider's reference)
    --   error      a call failed and may be retried (answer: the error: timed out, 5xx, transport)
    --   refused    a call was refused (4xx); retrying it will not help (answer: the error)
    --   failed     not a call: the delivery gave up (after its last attempt, or a refusal)
    --   retried    not a call: a manager put the failed delivery back (actor: who)
    outcome    text NOT NULL CHECK (outcome IN ('delivered', 'error', 'refused', 'failed', 'retried')),
    -- a call's number within its round (1.. up to the attempts allowed; a manager's retry
    -- starts a new round at 1); NULL for 'failed' and 'retried'
    attempt    integer CHECK (attempt >= 1),
    -- the provider's answer (reference or error); NULL for 'retried'
    answer     text,
    -- the admin token's name of a 'retried'
    actor      text,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((outcome IN ('failed', 'retried')) = (attempt IS NULL)),
    CHECK ((outcome = 'retried') = (actor IS NOT NULL))
);
CREATE INDEX delivery_attempts_of_row ON delivery_attempts (outbox, outbox_id, seq);
CREATE TRIGGER delivery_attempts_append_only BEFORE UPDATE OR DELETE ON delivery_attempts
    FOR EACH ROW EXECUTE FUNCTION gift_is_append_only();
CREATE TRIGGER delivery_attempts_no_truncate BEFORE TRUNCATE ON delivery_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION gift_is_append_only();
