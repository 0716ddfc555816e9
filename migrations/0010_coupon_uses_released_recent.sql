-- The gate audit looks at the uses released in the last minute (their code's used-up flag and
-- her cached use in Redis may have missed the release): a partial index on the time of the
-- release keeps that look cheap however many uses a code has had.
CREATE INDEX coupon_uses_released_recent ON coupon_uses (updated_at) WHERE status = 'released';
