-- Judges every item's count rows against the recount at cut T, as the reconcile function's
-- own compare does (likes_core::reconcile::judge), and lists only what the function must
-- act on: the items that drifted, the census of the export and the totals.
--
-- ${recount}:         recount.sql, over the export of the Reactions table at T
-- ${counts}:          the table over an export of the Counts table taken after the pipeline
--                     had applied every flip before T + the uncertainty
-- ${later_likes}:     `- COALESCE(CAST(item.e<j>l.n AS BIGINT), 0)` for every epoch j from
--                     T's to the Counts export's: a row's likes applied before T are its
--                     total less the subtotals of those epochs
-- ${later_dislikes}:  the same for `e<j>d`
-- ${near}:            `n<k>`, the row's changes within the uncertainty of T (epoch k); a row
--                     keeps those near the cuts opening and closing its first epoch in
--                     `nf0` and `nf1`
-- ${cut_epoch}:       k, T's epoch: a row whose first epoch `fe` is k or later applied
--                     nothing before T (it keeps no subtotal for its first epoch)
--
-- An item whose rows hold changes near T is deferred, as the function defers it. Every
-- other item whose recount differs from what its rows applied before T is listed as
-- `drift`, with its recount, for the function to judge again from its live rows (which also
-- hold what this run has corrected already) and correct. So is every item with overflow
-- rows beyond what its marker (shard `H`, `partitions`) names, which no reader adds, near T
-- or not: its `n` is the highest overflow partition holding a row, for the function to
-- name on the marker again before it judges. The lines, `drift` last and in
-- item order so a paused compare can go on after an item:
--
--   kind       item_id   likes, dislikes   n
--   in_sync              -                 items whose rows match the recount
--   deferred             -                 items with changes near T
--   drifted              -                 the drift lines that follow
--   rows                 -                 rows of the export, every kind
--   probes               -                 probe rows
--   foreign              -                 foreign rows
--   unknown    an item   -                 its rows in no known state
--   drift      an item   its recount       its highest overflow partition
WITH recount AS (${recount}),
counted AS (
  SELECT
    split_part(item.item_id.s, '#', 1) AS item_id,
    SUM(CASE WHEN CAST(item.fe.n AS BIGINT) >= ${cut_epoch} THEN 0
      ELSE COALESCE(CAST(item.like_count.n AS BIGINT), 0) ${later_likes} END) AS likes,
    SUM(CASE WHEN CAST(item.fe.n AS BIGINT) >= ${cut_epoch} THEN 0
      ELSE COALESCE(CAST(item.dislike_count.n AS BIGINT), 0) ${later_dislikes} END) AS dislikes,
    SUM(COALESCE(CAST(item.${near}.n AS BIGINT), 0) + CASE CAST(item.fe.n AS BIGINT)
      WHEN ${cut_epoch} THEN COALESCE(CAST(item.nf0.n AS BIGINT), 0)
      WHEN ${cut_epoch} - 1 THEN COALESCE(CAST(item.nf1.n AS BIGINT), 0) ELSE 0 END) AS near,
    MAX(CASE WHEN strpos(item.item_id.s, '#') > 0
      THEN CAST(split_part(item.item_id.s, '#', 2) AS BIGINT) ELSE 0 END) AS overflow
  FROM ${counts}
  WHERE item.shard.s LIKE 'D#%' AND item.item_id.s NOT LIKE '#%'
  GROUP BY 1
),
marked AS (
  SELECT item.item_id.s AS item_id, MAX(CAST(item.partitions.n AS BIGINT)) AS partitions
  FROM ${counts}
  WHERE item.shard.s = 'H' AND strpos(item.item_id.s, '#') = 0
  GROUP BY 1
),
judged AS (
  SELECT
    COALESCE(r.item_id, c.item_id) AS item_id,
    COALESCE(r.likes, 0) AS likes,
    COALESCE(r.dislikes, 0) AS dislikes,
    COALESCE(c.near, 0) > 0 AS near,
    COALESCE(r.likes, 0) = COALESCE(c.likes, 0)
      AND COALESCE(r.dislikes, 0) = COALESCE(c.dislikes, 0) AS in_sync,
    COALESCE(c.overflow, 0) AS overflow,
    COALESCE(c.overflow, 0) > COALESCE(m.partitions, 0) AS hidden
  FROM (SELECT * FROM recount WHERE item_id <> '#probe') r
  FULL OUTER JOIN counted c ON r.item_id = c.item_id
  LEFT JOIN marked m ON m.item_id = COALESCE(r.item_id, c.item_id)
)
SELECT kind, item_id, likes, dislikes, n
FROM (
  SELECT 'in_sync' AS kind, CAST(NULL AS VARCHAR) AS item_id, CAST(NULL AS BIGINT) AS likes,
    CAST(NULL AS BIGINT) AS dislikes, COUNT(*) AS n
  FROM judged WHERE NOT near AND in_sync AND NOT hidden
  UNION ALL
  SELECT 'deferred', NULL, NULL, NULL, COUNT(*) FROM judged WHERE near AND NOT hidden
  UNION ALL
  SELECT 'drifted', NULL, NULL, NULL, COUNT(*) FROM judged
  WHERE hidden OR (NOT near AND NOT in_sync)
  UNION ALL
  SELECT 'rows', NULL, NULL, NULL, COALESCE(SUM(row_count), 0) FROM recount
  UNION ALL
  SELECT 'probes', NULL, NULL, NULL, COALESCE(SUM(row_count), 0) FROM recount
  WHERE item_id = '#probe'
  UNION ALL
  SELECT 'foreign', NULL, NULL, NULL, COALESCE(SUM(row_count), 0) FROM recount
  WHERE item_id IS NULL
  UNION ALL
  SELECT 'unknown', item_id, NULL, NULL, unknown_states FROM recount
  WHERE unknown_states > 0 AND item_id <> '#probe'
  UNION ALL
  SELECT 'drift', item_id, likes, dislikes, overflow FROM judged
  WHERE hidden OR (NOT near AND NOT in_sync)
) lines
ORDER BY CASE kind WHEN 'drift' THEN 1 ELSE 0 END, kind, item_id
