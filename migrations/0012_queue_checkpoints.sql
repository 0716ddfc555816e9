-- What a waiting room needs to resume by itself after Redis lost its queue (docs/
-- WAITING-ROOM.md, "When Redis loses the queue"): the queue's counters as the admitting task
-- last read them from Redis, at most about a second old. Written by every origin's admitting
-- task, never moved back (each counter only grows in Redis). A restore reopens the queue from
-- this row: `now_serving` and `admitted` where they were, the drawn customers still waiting
-- still ahead of every arrival, new arrival numbers after every number issued before the loss.
CREATE TABLE queue_checkpoints (
    campaign_id   text PRIMARY KEY REFERENCES campaigns (id),
    -- the highest sequence number admitted
    now_serving   bigint NOT NULL CHECK (now_serving >= 0),
    -- customers admitted
    admitted      bigint NOT NULL CHECK (admitted >= 0),
    -- sequence numbers drawn at random (below 2^40)
    drawn         bigint NOT NULL CHECK (drawn >= 0),
    -- arrival numbers issued (2^40 + 1 .. 2^40 + arrivals)
    arrivals      bigint NOT NULL CHECK (arrivals >= 0),
    -- arrival numbers issued since the checkpoint before: the join rate of the last interval,
    -- by which a restore skips ahead (numbers issued after this checkpoint are not reissued)
    arrivals_step bigint NOT NULL DEFAULT 0 CHECK (arrivals_step >= 0),
    saved_at      timestamptz NOT NULL DEFAULT now()
);
