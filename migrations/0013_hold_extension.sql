-- Hold extension (issue 34): a sale may let the checkout extend a hold once, by at most
-- `hold_extension_seconds` (0 = off). The extension is one conditional UPDATE of
-- `claims.held_until`, so the sweeper and `pay` both go by the new end.

-- 0 = off; at most one hour. A constant default: adding the column rewrites nothing.
ALTER TABLE campaigns ADD COLUMN hold_extension_seconds integer NOT NULL DEFAULT 0
    CHECK (hold_extension_seconds BETWEEN 0 AND 3600);

-- When the claim's hold was extended (NULL: never; a claim is extended once at most) and the
-- Idempotency-Key of that extend, so the same request again gets the same 200.
ALTER TABLE claims ADD COLUMN extended_at timestamptz;
ALTER TABLE claims ADD COLUMN extend_key text;

-- The ledger records extensions too.
ALTER TABLE ledger DROP CONSTRAINT ledger_event_check;
ALTER TABLE ledger ADD CONSTRAINT ledger_event_check
    CHECK (event IN ('claimed', 'paid', 'released', 'expired', 'issued', 'redeemed', 'extended'));

-- A manager's change of `hold_extension_seconds` is audited like every other change.
ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at',
                      'disable', 'enable', 'export',
                      'set_waiting_room', 'pause_admission', 'resume_admission',
                      'set_hold_extension'));

