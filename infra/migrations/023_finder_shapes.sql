-- The email finder's evidence from addresses known to exist but not tied to a name (docs/api.md,
-- "Data endpoints"): how many addresses of the domain had each shape of local part
-- (`word.word`, `initial.word`, ...; packages/enrich/src/finder/shapes.ts). A fresh `valid`
-- verdict of any validation, job or find adds one; only the shape is kept, never the address.
-- The finder reads a shape as weaker evidence for the patterns that produce it.
CREATE TABLE finder_shapes (
  domain text NOT NULL,
  shape text NOT NULL,
  seen integer NOT NULL CHECK (seen > 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (domain, shape)
);
