-- Draw campaigns (issue 36, `access: "draw"`): customers enter during an entry window, the
-- origin draws when it closes, with a seed committed to (SHA-256, `commitment`) when the
-- campaign was created and revealed with the result. A campaign is a draw when it has a row
-- here; the rules of the draw are those of the shared crate's `draw` module (docs/DRAWS.md).
CREATE TABLE draws (
    campaign_id text PRIMARY KEY REFERENCES campaigns (id) ON DELETE CASCADE,
    -- The entry window [entries_open_at, entries_close_at).
    entries_open_at timestamptz NOT NULL,
    entries_close_at timestamptz NOT NULL,
    -- How long a winner may claim once admitted, seconds (up to 48 hours).
    buying_window_seconds integer NOT NULL CHECK (buying_window_seconds BETWEEN 1 AND 172800),
    -- The secret seed (kept until the draw) and lowercase hex SHA-256 of it.
    seed bytea NOT NULL CHECK (length(seed) = 32),
    commitment text NOT NULL,
    -- Set by the draw, in the transaction that ranks the entries.
    drawn_at timestamptz,
    entries_digest text,
    entry_count integer,
    CHECK (entries_open_at < entries_close_at)
);

-- One row per customer who entered (a second entry finds this one: one entry per customer).
CREATE TABLE draw_entries (
    campaign_id text NOT NULL REFERENCES draws (campaign_id) ON DELETE CASCADE,
    customer_id text NOT NULL,
    -- The receipt's id, `e_` + 32 hex digits.
    entry_id text NOT NULL UNIQUE,
    entered_at timestamptz NOT NULL DEFAULT now(),
    -- 1-based place in the draw's order (NULL until drawn); places 1..=stock win.
    place integer,
    -- When her buying window opened (winners at the draw; the waitlist as units pass to it).
    admitted_at timestamptz,
    -- When her buying window ended without a claim (or her hold ended unpaid after it): her
    -- unit passed to the next on the waitlist.
    lapsed_at timestamptz,
    PRIMARY KEY (campaign_id, customer_id)
);
CREATE UNIQUE INDEX draw_entries_place ON draw_entries (campaign_id, place);

-- What the origins look at every second: draws not drawn yet, and admitted winners who have
-- not lapsed (at most `stock` rows per campaign, plus the waitlist admitted after them).
CREATE INDEX draws_due ON draws (entries_close_at) WHERE drawn_at IS NULL;
CREATE INDEX draw_entries_admitted ON draw_entries (campaign_id)
    WHERE admitted_at IS NOT NULL AND lapsed_at IS NULL;
