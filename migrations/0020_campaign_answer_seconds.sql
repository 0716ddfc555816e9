-- The edge's own answers per campaign, second and result (issue 37's whole-sale view): each
-- edge isolate reports the claim answers it gave itself (sold_out, not_started, queued,
-- rate_limited, …) and the joins that failed their challenge (`challenge_<reason>`), at most
-- once a second per campaign (POST /edge/v1/campaigns/{id}/answers). Kept for the campaign's
-- life; the series endpoint reads them next to the origin's claims.
CREATE TABLE campaign_answer_seconds (
    campaign_id text NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    -- The whole second (UTC) the answers were given in, on the edge's clock.
    second timestamptz NOT NULL,
    -- The answer's result, or `challenge_<reason>`: 1..=40 bytes [a-z_].
    result text NOT NULL CHECK (result ~ '^[a-z_]{1,40}$'),
    count bigint NOT NULL CHECK (count > 0),
    PRIMARY KEY (campaign_id, second, result)
);

-- The answer reports counted lately, so a retried report counts once. A report's edge
-- signature is refused after 60 s, so ids older than a few minutes are deleted as reports come.
CREATE TABLE edge_answer_reports (
    campaign_id text NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    report_id text NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign_id, report_id)
);
CREATE INDEX edge_answer_reports_received ON edge_answer_reports (campaign_id, received_at);
