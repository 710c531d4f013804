-- The recount of the Reactions table from one of its exports: per item, its LIKE and
-- DISLIKE rows, as the reconcile function's own reader counts them. It runs unchanged in
-- Athena (Trino) and in DuckDB; only ${export} differs: the table export_table.sql creates,
-- or DuckDB's read_json over the data files (recount_duckdb.py).
--
-- A row is a reaction when its item_id is a valid item id: 1-128 characters of
-- [A-Za-z0-9_.:-]. That leaves out the pulse's probe rows (item_id '#probe': '#' is never in
-- an item id) and any foreign row. Trino has regexp_like and DuckDB does not, so the test is
-- that deleting every allowed character (translate) leaves nothing.
--
-- Every item with a reaction row in any state is listed, NONE-only items as 0 and 0.
-- unknown_states counts reaction rows in no known state (or none): the reader fails on such
-- a row, so a caller of this query must fail when it is not 0.
SELECT
  item.item_id.s AS item_id,
  SUM(CASE WHEN item.state.s = 'LIKE' THEN 1 ELSE 0 END) AS likes,
  SUM(CASE WHEN item.state.s = 'DISLIKE' THEN 1 ELSE 0 END) AS dislikes,
  SUM(CASE WHEN item.state.s IN ('LIKE', 'DISLIKE', 'NONE') THEN 0 ELSE 1 END) AS unknown_states
FROM ${export}
WHERE length(item.item_id.s) BETWEEN 1 AND 128
  AND translate(
    item.item_id.s,
    'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-',
    ''
  ) = ''
GROUP BY item.item_id.s
ORDER BY item_id
