-- Coupon codes, admin side (issue 10): one active use per (code, order), codes a manager can
-- disable and enable again, and audit rows for code actions (disable, enable, batch export).

-- One use per (code, order): a second held or used use of the same code on the same order is
-- refused by the database, whoever sends it and with whatever Idempotency-Key. Released uses
-- do not count (the order may use the code again after its payment failed).
CREATE UNIQUE INDEX coupon_uses_one_per_order
    ON coupon_uses (code, order_ref)
    WHERE status IN ('held', 'used');

-- A disabled code is refused by every use (the take's condition) and by every check (the
-- cached state in Redis). NULL = enabled. A nullable column without a default costs nothing
-- to add and nothing per COPYed row.
ALTER TABLE coupon_codes ADD COLUMN disabled_at timestamptz;

-- The audit trail also records code actions: `code` names the code (disable, enable), or
-- `batch_id` the batch of one-time codes (export); `campaign_id` is then NULL.
ALTER TABLE admin_audit ALTER COLUMN campaign_id DROP NOT NULL;
ALTER TABLE admin_audit ADD COLUMN code text;
ALTER TABLE admin_audit ADD COLUMN batch_id text REFERENCES coupon_batches (id);
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_one_subject
    CHECK (num_nonnulls(campaign_id, code, batch_id) = 1);
ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at',
                      'disable', 'enable', 'export'));
CREATE INDEX admin_audit_code ON admin_audit (code, seq) WHERE code IS NOT NULL;
CREATE INDEX admin_audit_batch ON admin_audit (batch_id, seq) WHERE batch_id IS NOT NULL;
