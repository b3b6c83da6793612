-- The blob store on the relational store (DESIGN 2 store/, issue 7 item 3): PgBlobStore
-- (packages/store/src/blob-pg.ts), so that in the cluster profile any front serves any upload and
-- download. The same SQL runs on PGlite and Postgres.
--
-- A blob is a blob_objects row and its bytes in blob_chunks, ~1 MiB each, numbered from 0. A put
-- writes a 'staged' object under a fresh id and inserts each chunk as it fills; it publishes in
-- ONE transaction (under an advisory lock on the key) that deletes the key's 'live' object (its
-- chunks go by cascade) and turns the staged one 'live'. Readers only ever look at 'live' objects
-- and read chunks by object id, so they see a whole blob or none, never a mix of two puts. A crash
-- mid-put leaves only a 'staged' object (and its chunks), invisible to get/exists, deleted by
-- sweepPartials() once untouched for a while; a chunk insert bumps touched_at, and finds nothing
-- to insert under (the put then fails) once its staged object was swept.
CREATE TABLE blob_objects (
  id text PRIMARY KEY,
  key text NOT NULL,
  state text NOT NULL CHECK (state IN ('staged', 'live')),
  -- set when published
  bytes bigint CHECK (bytes >= 0),
  chunks integer CHECK (chunks >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  touched_at timestamptz NOT NULL DEFAULT now(),
  CHECK (state = 'staged' OR (bytes IS NOT NULL AND chunks IS NOT NULL))
);
-- at most one live blob per key (and the lookup of get/exists/delete)
CREATE UNIQUE INDEX blob_objects_live_key ON blob_objects (key) WHERE state = 'live';

CREATE TABLE blob_chunks (
  object_id text NOT NULL REFERENCES blob_objects(id) ON DELETE CASCADE,
  seq integer NOT NULL CHECK (seq >= 0),
  data bytea NOT NULL,
  PRIMARY KEY (object_id, seq)
);
