-- A draw's stock (issue: a restock after the draw rewrote the published result): the number of
-- units the draw was made for, written by the draw with `drawn_at`. The published winners are
-- the first `drawn_stock` places whatever the campaign's stock becomes. Draws made before this
-- column get the campaign's stock as it is now (the best record of it left).
ALTER TABLE draws ADD COLUMN drawn_stock bigint;
UPDATE draws d SET drawn_stock = c.stock
  FROM campaigns c WHERE c.id = d.campaign_id AND d.drawn_at IS NOT NULL;
ALTER TABLE draws ADD CONSTRAINT draws_drawn_stock_when_drawn
    CHECK ((drawn_at IS NULL) = (drawn_stock IS NULL));
