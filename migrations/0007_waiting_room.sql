-- The waiting room (issue 12): a campaign's optional `waiting_room` option, kept as the JSON
-- object the admin API takes (`{"admit_per_second", "queueing", "prequeue_seconds",
-- "admission_ttl_seconds"}`; NULL = no waiting room, the campaign behaves as without one), and
-- whether a manager has paused admission. The queue itself (sequence numbers, now_serving)
-- lives in Redis; these two columns are what the admitting task reads on every origin.
ALTER TABLE campaigns ADD COLUMN waiting_room jsonb;
ALTER TABLE campaigns ADD COLUMN queue_paused boolean NOT NULL DEFAULT false;

-- Managers' waiting-room changes are audited like the others.
ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at',
                      'disable', 'enable', 'export',
                      'set_waiting_room', 'pause_admission', 'resume_admission'));
