-- Runs bench.steps :repeat times, after one round that warms the backend's
-- caches and is not recorded (rep 0: bench.measure records reps > 0 only).
-- Round after round, each in the order of n, so that a slow spell of the
-- machine falls on every variant alike rather than on the one running.
-- The report takes the median over the rounds.
--
-- Every step is a statement of its own at top level (\gexec), as a timed
-- statement must be: bench.measure commits, and VACUUM cannot run inside a
-- transaction block or a function.
--
-- Variables: repeat (set by the including file: \set repeat :reps).
SELECT CASE WHEN s.phase IS NULL THEN s.sql
            ELSE format('CALL bench.measure(%L, %L, %s, %L, %s, %L, %L)',
                        s.phase, s.variant, r, s.access, s.calls, s.sql, s.store) END
  FROM bench.steps s, generate_series(0, :repeat) r
 WHERE s.rep IS NULL OR s.rep = r
 ORDER BY r, s.n
\gexec
