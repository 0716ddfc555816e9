-- Creating a campaign is audited like every later change (issue 7): widen the action check.
ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at'));
