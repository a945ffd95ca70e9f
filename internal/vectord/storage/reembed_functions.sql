CREATE OR REPLACE FUNCTION vectord_reembed_stale() RETURNS trigger LANGUAGE plpgsql AS $f$
-- A write changing an item's content clears the vector of the model it moves to.
BEGIN
  IF NEW.content_hash IS DISTINCT FROM OLD.content_hash THEN
    NEW.embedding_next := NULL;
  END IF;
  RETURN NEW;
END
$f$;
