-- The fingerprint of the extend request that extended a claim's hold (the same SHA-256 of
-- scope and canonical JSON body as every other Idempotency-Key): the same key again with
-- another body is 422 `idempotency_key_reused`, as for claims, code uses and admin writes,
-- instead of the first reply. NULL for holds extended before this column: their key replays.
ALTER TABLE claims ADD COLUMN extend_fp text;
