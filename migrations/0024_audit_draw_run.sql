-- A manager's early draw (`POST /admin/v1/campaigns/{id}/draw/run`) is audited like every
-- other change, as `draw_run`: the draw's window and state before, and after its count, stock
-- and `drawn_at`.
ALTER TABLE admin_audit DROP CONSTRAINT admin_audit_action_check;
ALTER TABLE admin_audit ADD CONSTRAINT admin_audit_action_check
    CHECK (action IN ('create', 'pause', 'resume', 'close', 'restock', 'set_stock', 'set_ends_at',
                      'disable', 'enable', 'export',
                      'set_waiting_room', 'pause_admission', 'resume_admission',
                      'set_hold_extension', 'set_variant', 'draw_run'));
