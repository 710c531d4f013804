-- Judges every all-time score row of the leaderboard against the recount's likes at cut T,
-- as the function judges a count (likes_core::reconcile::judge): an item's score applied
-- before T is its score less its like subtotals of the epochs from T's on (see
-- ${cut_epoch} for a row first written at or after T). Every item with
-- likes in the recount or a score row is judged.
--
-- ${recount}:      recount.sql, over the export of the Reactions table at T
-- ${board}:        the table over an export of the Leaderboard table taken after the board
--                  had applied every event before T + the uncertainty
-- ${later_likes}:  `- COALESCE(CAST(item.e<j>l.n AS BIGINT), 0)` for every epoch j from T's
--                  to the board export's
-- ${near}:         `n<k>`, the row's likes within the uncertainty of T (epoch k); a row
--                  keeps those near the cuts opening and closing its first epoch in
--                  `nf0` and `nf1`
-- ${cut_epoch}:    k, T's epoch. A row keeps no subtotal for its first epoch `fe`; one
--                  first written at k or later applied before T only likes from epochs
--                  before its first, which it sums in `bfl`: those less the ones from k on
-- ${earlier_likes}: `- CASE WHEN j < fe THEN COALESCE(CAST(item.e<j>l.n AS BIGINT), 0)
--                  ELSE 0 END` for the same epochs
--
-- The lines, `drift` last and in item order:
--
--   kind       item_id   likes          n
--   in_sync              -              items whose score matches the recount
--   deferred             -              items with likes near T
--   drifted              -              the drift lines that follow
--   drift      an item   its recount    -
WITH recount AS (${recount}),
scored AS (
  SELECT
    item.item_id.s AS item_id,
    CASE WHEN CAST(item.fe.n AS BIGINT) >= ${cut_epoch}
      THEN COALESCE(CAST(item.bfl.n AS BIGINT), 0) ${earlier_likes}
      ELSE COALESCE(CAST(item.score.n AS BIGINT), 0) ${later_likes} END AS likes,
    COALESCE(CAST(item.${near}.n AS BIGINT), 0) + CASE CAST(item.fe.n AS BIGINT)
      WHEN ${cut_epoch} THEN COALESCE(CAST(item.nf0.n AS BIGINT), 0)
      WHEN ${cut_epoch} - 1 THEN COALESCE(CAST(item.nf1.n AS BIGINT), 0) ELSE 0 END AS near
  FROM ${board}
  WHERE item.board.s LIKE 'all#%'
),
judged AS (
  SELECT
    COALESCE(r.item_id, s.item_id) AS item_id,
    COALESCE(r.likes, 0) AS likes,
    COALESCE(s.near, 0) > 0 AS near,
    COALESCE(r.likes, 0) = COALESCE(s.likes, 0) AS in_sync
  FROM (SELECT item_id, likes FROM recount WHERE likes > 0 AND item_id <> '#probe') r
  FULL OUTER JOIN scored s ON r.item_id = s.item_id
)
SELECT kind, item_id, likes, n
FROM (
  SELECT 'in_sync' AS kind, CAST(NULL AS VARCHAR) AS item_id, CAST(NULL AS BIGINT) AS likes,
    COUNT(*) AS n
  FROM judged WHERE NOT near AND in_sync
  UNION ALL
  SELECT 'deferred', NULL, NULL, COUNT(*) FROM judged WHERE near
  UNION ALL
  SELECT 'drifted', NULL, NULL, COUNT(*) FROM judged WHERE NOT near AND NOT in_sync
  UNION ALL
  SELECT 'drift', item_id, likes, NULL FROM judged WHERE NOT near AND NOT in_sync
) lines
ORDER BY CASE kind WHEN 'drift' THEN 1 ELSE 0 END, kind, item_id
