-- When a key was last used, for operators (`admin key list`). Written at most about once a minute
-- per key (see KeysRepo.touch), never once per request: NULL means not used since this column
-- was added.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
