-- The number of shards of a campaign's Redis gate: its units are kept in that many counters,
-- each in its own Redis Cluster slot. Fixed at creation. Existing campaigns keep one shard (the
-- unsharded gate).
ALTER TABLE campaigns ADD COLUMN gate_shards integer NOT NULL DEFAULT 1
    CHECK (gate_shards BETWEEN 1 AND 1024);
