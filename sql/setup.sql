-- Runs first (the Makefile and scripts/test.sh put it before the others):
-- what every test file of this database shares.
--
-- regress.try(sql): runs a statement and returns 'ok: <its result>' or
-- '<SQLSTATE>: <message>', so that an expected error is one line of output
-- and the test goes on.  In a schema of its own, usable by the roles the
-- tests create.
CREATE SCHEMA regress;
GRANT USAGE ON SCHEMA regress TO PUBLIC;
CREATE FUNCTION regress.try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    EXECUTE sql INTO result;
    RETURN 'ok: ' || result;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
