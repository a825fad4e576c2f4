-- Every generation exactly once (ARCHITECTURE.md): a lease per generation cache key, as
-- in PostgreSQL. One process and one clock here, so the expiry is Unix milliseconds.
CREATE TABLE generation_leases (
    model_fingerprint  TEXT NOT NULL,
    prompt_sha256      TEXT NOT NULL,
    params             TEXT NOT NULL,
    holder             TEXT NOT NULL,
    expires_ms         INTEGER NOT NULL,
    PRIMARY KEY (model_fingerprint, prompt_sha256, params)
);

-- Token usage of each generation, as the backend reported it (NULL when it did not).
ALTER TABLE generation_cache ADD COLUMN prompt_tokens INTEGER;
ALTER TABLE generation_cache ADD COLUMN completion_tokens INTEGER;

-- An example whose decomposition failed: empty claims, the reason here (NULL otherwise).
ALTER TABLE predictions ADD COLUMN error TEXT;
