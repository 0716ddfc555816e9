-- Variants: sizes, colours or editions inside one campaign. Each has its own stock and
-- remaining; the campaign's stock and remaining are their sums. One active claim per customer
-- per campaign across its variants (the existing unique index over active claims).

CREATE TABLE campaign_variants (
    campaign_id  text NOT NULL REFERENCES campaigns (id),
    -- same rules as a campaign id: [a-z0-9-]{1,64}
    id           text NOT NULL,
    name         text NOT NULL,
    stock        bigint NOT NULL CHECK (stock >= 0),
    remaining    bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign_id, id),
    CHECK (remaining >= 0 AND remaining <= stock)
);

-- The variant a claim took; NULL on a campaign without variants.
ALTER TABLE claims ADD COLUMN variant text;

-- A claim that stops holding its unit (released, expired) gives it back to its variant, in the
-- same statement that gives it back to the campaign's remaining.
CREATE FUNCTION claims_variant_return() RETURNS trigger AS $$
BEGIN
    IF NEW.variant IS NOT NULL
       AND OLD.status IN ('held', 'paid', 'issued', 'redeemed')
       AND NEW.status NOT IN ('held', 'paid', 'issued', 'redeemed') THEN
        UPDATE campaign_variants SET remaining = remaining + 1, updated_at = now()
         WHERE campaign_id = NEW.campaign_id AND id = NEW.variant;
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER claims_variant_return AFTER UPDATE OF status ON claims
    FOR EACH ROW EXECUTE FUNCTION claims_variant_return();

ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at',
                      'disable', 'enable', 'export',
                      'set_waiting_room', 'pause_admission', 'resume_admission',
                      'set_hold_extension', 'set_variant'));
