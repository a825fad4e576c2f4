-- Every generation exactly once (ARCHITECTURE.md): a lease per generation cache key, so
-- that the four mode jobs of one example, running at once on different workers, make one
-- base generation between them. The first to lease generates; the others wait for the
-- cache entry. A lease runs out at expires_at (the database's clock), so a crashed
-- holder's generation is taken over.
CREATE TABLE generation_leases (
    model_fingerprint  text NOT NULL,
    prompt_sha256      text NOT NULL,
    params             text NOT NULL,
    holder             text NOT NULL,
    expires_at         timestamptz NOT NULL,
    PRIMARY KEY (model_fingerprint, prompt_sha256, params)
);

-- Token usage of each generation, as the backend reported it (NULL when it did not).
ALTER TABLE generation_cache ADD COLUMN prompt_tokens bigint;
ALTER TABLE generation_cache ADD COLUMN completion_tokens bigint;

-- An example whose decomposition failed (an unusable answer after every retry, or a
-- request the server refused for its content): its claims are empty, its metrics those
-- of an empty list, and the reason is here. NULL for every example that decomposed.
ALTER TABLE predictions ADD COLUMN error text;
