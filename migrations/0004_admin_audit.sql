-- The audit trail of campaign managers' changes (issue 7): one row per change, written by the
-- same SQL statement (so the same transaction) as the change itself. Append-only.

CREATE TABLE admin_audit (
    seq          bigserial PRIMARY KEY,
    campaign_id  text NOT NULL REFERENCES campaigns (id),
    -- the name of the admin token that made the change (never the token)
    actor        text NOT NULL,
    action       text NOT NULL
                 CHECK (action IN ('pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at')),
    -- the request's parameters, e.g. {"add": 5}
    params       jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- the campaign's stock, remaining, paused, starts_at and ends_at before and after
    before       jsonb NOT NULL,
    after        jsonb NOT NULL,
    -- when the change was made (the time of its statement, just before its commit)
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX admin_audit_campaign ON admin_audit (campaign_id, seq);

CREATE FUNCTION admin_audit_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the admin audit trail is append-only';
END $$;
CREATE TRIGGER admin_audit_append_only BEFORE UPDATE OR DELETE ON admin_audit
    FOR EACH ROW EXECUTE FUNCTION admin_audit_is_append_only();
