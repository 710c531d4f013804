-- Judges every liked entry of the likers lists against the likes of the Reactions table at
-- cut T, and lists the (item, user) pairs the function must repair, with both sides, for
-- likes_core::likers::repair to decide and write conditionally, as the pipeline would; the
-- likers buckets that hold a liked entry but that no count row of their item lists (a page
-- reads only listed buckets); and the reactions to removed items, for the function to
-- retract.
--
-- ${reactions}:       the table over the export of the Reactions table at T
-- ${likers}:          the table over an export of the Likers table taken after T
-- ${counts}:          the table over the export of the Counts table the counts are judged on
-- ${settled_before}:  T - the uncertainty (epoch ms): a listed like given since may be one
--                     the export is not sure of, and is left alone
-- ${bucket_blobs}:    `(VALUES (0, '<base64>'), ...) AS blobs(bucket, encoded)`: each likers
--                     bucket as a count row's `lbs` set holds it (a binary, base64 in the
--                     export)
-- ${removed}:         the removed items' ids, quoted and comma separated (a NULL when none)
--
-- A like of the export's (a reaction row in LIKE, its order read as the reader reads it:
-- created_at, 0 when missing, then op_id; liked_at, or updated_at without it, is when it
-- was liked) that no entry lists, or lists at an older flip, is listed; so is a liked entry
-- (one with liked_at; a user may have several while events are lost) the export does not
-- hold, liked before ${settled_before}. The lines, in this order, each kind in item order:
--
--   kind        item_id, user_id   listed_*, exported_*            n
--   unreadable                     -                               likes whose order is not
--                                                                  a number: never listed
--   unlisted    the item           -                               the bucket to list
--   removed     the pair           -                               -  (a LIKE or DISLIKE)
--   repair      the pair           the entry's and the row's       -
--                                  (created, op_id, liked at),
--                                  NULL where it has none
WITH liked AS (
  SELECT
    item.item_id.s AS item_id,
    item.user_id.s AS user_id,
    CASE WHEN item.created_at IS NULL THEN 0
      ELSE TRY_CAST(item.created_at.n AS BIGINT) END AS created,
    TRY_CAST(item.op_id.n AS BIGINT) AS op_id,
    TRY_CAST(COALESCE(item.liked_at.n, item.updated_at.n) AS BIGINT) AS liked_at
  FROM ${reactions}
  WHERE item.state.s = 'LIKE'
    AND length(item.item_id.s) BETWEEN 1 AND 128
    AND translate(
      item.item_id.s,
      'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-',
      ''
    ) = ''
),
exported AS (
  SELECT * FROM liked
  WHERE created IS NOT NULL AND op_id >= 0 AND liked_at IS NOT NULL
),
listed AS (
  SELECT
    split_part(item.bucket.s, '#', 1) AS item_id,
    item.user_id.s AS user_id,
    COALESCE(TRY_CAST(item.row_created.n AS BIGINT), 0) AS created,
    COALESCE(TRY_CAST(item.op_id.n AS BIGINT), 0) AS op_id,
    TRY_CAST(item.liked_at.n AS BIGINT) AS liked_at
  FROM ${likers}
  WHERE item.liked_at.n IS NOT NULL
),
held AS (
  SELECT DISTINCT item_id, TRY_CAST(split_part(bucket, '#', 2) AS BIGINT) AS bucket
  FROM (
    SELECT split_part(item.bucket.s, '#', 1) AS item_id, item.bucket.s AS bucket
    FROM ${likers}
    WHERE item.liked_at.n IS NOT NULL
  ) entries
),
listed_buckets AS (
  SELECT DISTINCT split_part(c.item.item_id.s, '#', 1) AS item_id, b.encoded
  FROM ${counts} c
  CROSS JOIN UNNEST(c.item.lbs.bs) AS b(encoded)
  WHERE c.item.shard.s LIKE 'D#%'
),
blobs AS (
  SELECT * FROM ${bucket_blobs}
)
SELECT kind, item_id, user_id, listed_created, listed_op_id, listed_at,
  exported_created, exported_op_id, exported_at, n
FROM (
  SELECT 'unreadable' AS kind, CAST(NULL AS VARCHAR) AS item_id,
    CAST(NULL AS VARCHAR) AS user_id, CAST(NULL AS BIGINT) AS listed_created,
    CAST(NULL AS BIGINT) AS listed_op_id, CAST(NULL AS BIGINT) AS listed_at,
    CAST(NULL AS BIGINT) AS exported_created, CAST(NULL AS BIGINT) AS exported_op_id,
    CAST(NULL AS BIGINT) AS exported_at, COUNT(*) AS n
  FROM liked
  WHERE created IS NULL OR op_id IS NULL OR op_id < 0 OR liked_at IS NULL
  UNION ALL
  SELECT 'unlisted', h.item_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, h.bucket
  FROM held h
  JOIN blobs ON blobs.bucket = h.bucket
  LEFT JOIN listed_buckets l ON l.item_id = h.item_id AND l.encoded = blobs.encoded
  WHERE l.item_id IS NULL
  UNION ALL
  SELECT 'removed', item.item_id.s, item.user_id.s, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM ${reactions}
  WHERE item.state.s IN ('LIKE', 'DISLIKE') AND item.item_id.s IN (${removed})
  UNION ALL
  SELECT 'repair', COALESCE(e.item_id, l.item_id), COALESCE(e.user_id, l.user_id),
    l.created, l.op_id, l.liked_at, e.created, e.op_id, e.liked_at, NULL
  FROM exported e
  FULL OUTER JOIN listed l ON e.item_id = l.item_id AND e.user_id = l.user_id
  WHERE (e.item_id IS NOT NULL AND (l.item_id IS NULL OR l.created < e.created
      OR (l.created = e.created AND l.op_id < e.op_id)))
    OR (e.item_id IS NULL AND l.liked_at < ${settled_before})
) lines
ORDER BY CASE kind WHEN 'unreadable' THEN 0 WHEN 'unlisted' THEN 1 WHEN 'removed' THEN 2
  ELSE 3 END, item_id, user_id, n
