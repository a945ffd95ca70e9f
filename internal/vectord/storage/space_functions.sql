CREATE OR REPLACE FUNCTION vectord_space_sync() RETURNS trigger LANGUAGE plpgsql AS $f$
-- TG_ARGV: [space id, corpus id]. Notes the ids whose vector the space must take
-- (inserted, deleted, or updated with another vector) for the applier (apply_some);
-- a search sees them pending and reads the corpus's own graph until they are applied.
BEGIN
  IF TG_OP = 'DELETE' THEN
    INSERT INTO vectord_space_pending (space_id, corpus_id, id)
    SELECT TG_ARGV[0]::bigint, TG_ARGV[1]::bigint, o.id FROM old_rows o ON CONFLICT DO NOTHING;
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO vectord_space_pending (space_id, corpus_id, id)
    SELECT TG_ARGV[0]::bigint, TG_ARGV[1]::bigint, n.id FROM new_rows n ON CONFLICT DO NOTHING;
  ELSE
    INSERT INTO vectord_space_pending (space_id, corpus_id, id)
    SELECT TG_ARGV[0]::bigint, TG_ARGV[1]::bigint, n.id FROM new_rows n
    JOIN old_rows o ON o.id = n.id WHERE n.embedding IS DISTINCT FROM o.embedding
    ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$f$;
