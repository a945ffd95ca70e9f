CREATE OR REPLACE FUNCTION vectord_convert_mirror() RETURNS trigger LANGUAGE plpgsql AS $f$
-- TG_ARGV: [the table a conversion moves the corpus to]. Every write to the corpus's items
-- while its copy runs reaches that table too (storage/convert_sql.py); the columns are
-- convert_sql.COLUMNS, the vector cast to the new table's precision on the way.
BEGIN
  IF TG_OP = 'DELETE' THEN
    EXECUTE format('DELETE FROM %I t USING old_rows o WHERE t.id = o.id', TG_ARGV[0]);
  ELSE
    EXECUTE format(
      'INSERT INTO %I AS t (id, embedding, title, text, tags, metadata, language, '
      'content_hash, created_at, updated_at) '
      'SELECT id, embedding, title, text, tags, metadata, language, content_hash, '
      'created_at, updated_at FROM new_rows '
      'ON CONFLICT (id) DO UPDATE SET embedding = EXCLUDED.embedding, '
      'title = EXCLUDED.title, text = EXCLUDED.text, tags = EXCLUDED.tags, '
      'metadata = EXCLUDED.metadata, language = EXCLUDED.language, '
      'content_hash = EXCLUDED.content_hash, created_at = EXCLUDED.created_at, '
      'updated_at = EXCLUDED.updated_at', TG_ARGV[0]);
  END IF;
  RETURN NULL;
END
$f$;
