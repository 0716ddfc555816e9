-- Coupon codes (seed "Coupons"): rules, codes with their count of uses left, one-time code
-- batches, and the (code, customer) uses. Money in integer minor units; percentages in basis
-- points (1000 = 10 %).

-- The rules of a shared code, or of every code of a one-time batch. Rules never change once
-- written, so every origin may cache them.
CREATE TABLE coupon_rules (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind               text NOT NULL CHECK (kind IN ('shared', 'one_time')),
    percent_off_bp     integer CHECK (percent_off_bp BETWEEN 1 AND 10000),
    amount_off         bigint CHECK (amount_off > 0),
    currency           text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    -- compared with the pre-discount cart total, inclusive
    min_order          bigint NOT NULL DEFAULT 0 CHECK (min_order >= 0),
    starts_at          timestamptz NOT NULL,
    ends_at            timestamptz NOT NULL,
    -- total uses of each code under these rules (1 for a one-time code)
    use_limit          bigint NOT NULL CHECK (use_limit >= 1),
    once_per_customer  boolean NOT NULL DEFAULT true,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK ((percent_off_bp IS NULL) <> (amount_off IS NULL)),
    CHECK (starts_at < ends_at),
    CHECK (kind = 'shared' OR use_limit = 1)
);

-- A one-time code batch: `count` codes under one rules row.
CREATE TABLE coupon_batches (
    id          text PRIMARY KEY,
    rules_id    bigint NOT NULL UNIQUE REFERENCES coupon_rules (id),
    count       bigint NOT NULL CHECK (count >= 1),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Every code, shared or one-time. Narrow on purpose: a batch of a million is COPYed in.
-- `uses_left` is the hot counter, taken by one conditional UPDATE that refuses below zero;
-- `version` grows with every change of it, so caches of the used-up flag apply changes in order.
-- Kept cheap for the bulk COPY (measured on a million rows: a regex CHECK on the code tripled
-- the time, a B-tree on rules_id added half): the origin normalises every code to A-Z0-9
-- before writing it, so only the length is checked here; no foreign key to coupon_rules
-- (rules rows are never deleted and codes are written in the same transaction as theirs);
-- rules_id has a BRIN index, since a batch's codes are written together under one growing id.
CREATE TABLE coupon_codes (
    code       text PRIMARY KEY CHECK (octet_length(code) BETWEEN 1 AND 64),
    rules_id   bigint NOT NULL,
    uses_left  bigint NOT NULL CHECK (uses_left >= 0),
    version    bigint NOT NULL DEFAULT 0
);
CREATE INDEX coupon_codes_rules ON coupon_codes USING brin (rules_id);

-- A customer's use of a code: held from the order until the payment is confirmed, released
-- when it fails or is not confirmed in time. Released rows stay for the record.
CREATE TABLE coupon_uses (
    id                 text PRIMARY KEY,
    code               text NOT NULL,
    customer_id        text NOT NULL,
    order_ref          text NOT NULL,
    cart_total         bigint NOT NULL CHECK (cart_total >= 0),
    discount           bigint NOT NULL CHECK (discount >= 0 AND discount <= cart_total),
    status             text NOT NULL CHECK (status IN ('held', 'used', 'released')),
    once_per_customer  boolean NOT NULL,
    held_until         timestamptz NOT NULL,
    -- who released it: 'service' (release call) or 'sweeper' (not confirmed in time)
    released_by        text CHECK (released_by IN ('service', 'sweeper')),
    idempotency_key    text NOT NULL,
    request_fp         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
-- Once per customer: the database's job (seed "Coupons", decision 1).
CREATE UNIQUE INDEX coupon_uses_once_per_customer
    ON coupon_uses (code, customer_id)
    WHERE once_per_customer AND status IN ('held', 'used');
CREATE INDEX coupon_uses_code_customer ON coupon_uses (code, customer_id);
CREATE INDEX coupon_uses_held_until ON coupon_uses (held_until) WHERE status = 'held';
