-- The foreign key claims.campaign_id → campaigns ran its check once per inserted claim: a
-- look-up of the campaign and a `FOR KEY SHARE` lock of its row, the one row every committing
-- transaction of the campaign also updates (its `remaining`), so the per-row locks of
-- concurrent batches are merged into multixacts. The grouped commit inserts its claims in one
-- statement per batch; the same guarantee is kept here once per statement:
-- - after an insert into claims, the campaigns the new claims name are locked `FOR KEY SHARE`
--   (as the foreign key's check locks them) and the insert fails with `foreign_key_violation`
--   (23503) unless every one of them exists;
-- - a campaign that has claims cannot be deleted, nor its id changed (the key's `NO ACTION`).
-- docs/ARCHITECTURE.md, "Grouped commits"; the measured cost is in docs/BENCHMARKS.md.
ALTER TABLE claims DROP CONSTRAINT claims_campaign_id_fkey;

CREATE FUNCTION claims_name_campaigns() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    named  bigint;
    locked bigint;
BEGIN
    SELECT count(DISTINCT campaign_id) INTO named FROM new_claims;
    -- Locked first, counted after: a campaign deleted before the lock is not counted.
    PERFORM 1 FROM campaigns c
      WHERE c.id IN (SELECT campaign_id FROM new_claims)
        FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < named THEN
        RAISE foreign_key_violation USING
            MESSAGE = 'a claim names a campaign that does not exist',
            CONSTRAINT = 'claims_campaign_id_fkey';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER claims_name_campaigns AFTER INSERT ON claims
    REFERENCING NEW TABLE AS new_claims
    FOR EACH STATEMENT EXECUTE FUNCTION claims_name_campaigns();

CREATE FUNCTION campaigns_keep_their_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'DELETE' OR NEW.id IS DISTINCT FROM OLD.id)
       AND EXISTS (SELECT 1 FROM claims WHERE campaign_id = OLD.id) THEN
        RAISE foreign_key_violation USING
            MESSAGE = 'the campaign has claims',
            CONSTRAINT = 'claims_campaign_id_fkey';
    END IF;
    RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER campaigns_keep_their_claims BEFORE DELETE OR UPDATE OF id ON campaigns
    FOR EACH ROW EXECUTE FUNCTION campaigns_keep_their_claims();
