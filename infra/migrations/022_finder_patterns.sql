-- The email finder's evidence per domain (docs/api.md, "Data endpoints"): how many proven
-- addresses of the domain followed each pattern (`{first}.{last}`, `{f}{last}`, ...). A find
-- whose candidate the domain's mail server accepted (a domain that is not catch-all) adds one;
-- the finder tries a domain's patterns in this order, and on a catch-all domain, where no
-- answer proves an address, its confidence comes from these counts alone.
CREATE TABLE finder_patterns (
  domain text NOT NULL,
  pattern text NOT NULL,
  confirmations integer NOT NULL CHECK (confirmations > 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (domain, pattern)
);
