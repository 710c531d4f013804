//! A judging query's result, read back a line at a time: the totals, the items that
//! drifted with their recount, the likers entries that may need repair, the likers buckets
//! to list and the reactions to removed items.

use aws_sdk_s3::primitives::ByteStream;
use likes_core::likers::{LikeAt, LIKER_BUCKETS};
use likes_core::pipeline::Counts;
use likes_core::ItemId;

use crate::ReconcileError;

const COUNTS_HEADER: &[&str] = &["kind", "item_id", "likes", "dislikes", "n"];
const SCORES_HEADER: &[&str] = &["kind", "item_id", "likes", "n"];
const LIKERS_HEADER: &[&str] = &[
    "kind",
    "item_id",
    "user_id",
    "listed_created",
    "listed_op_id",
    "listed_at",
    "exported_created",
    "exported_op_id",
    "exported_at",
    "n",
];

/// Which judging query a result is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    Counts,
    Scores,
    Likers,
}

/// A line of a judging query's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgedLine {
    /// A total: `in_sync`, `deferred`, `drifted`, `rows`, `probes`, `foreign` or
    /// `unreadable`.
    Total { kind: String, n: u64 },
    /// An item with rows in no known state: they counted as no change.
    Unknown { item_id: String, rows: u64 },
    /// An item whose read model differs from its recount, with the recount; for counts,
    /// also an item with overflow rows beyond its marker, which no reader adds, and the
    /// highest overflow partition holding one (`overflow`, 0 for none).
    Drift {
        item: ItemId,
        recount: Counts,
        overflow: u32,
    },
    /// A user's entry in an item's likers list that may need repair: the entry's like when
    /// it is liked, the export's when the user liked the item at the cut.
    Liker {
        item: ItemId,
        user_id: String,
        listed: Option<LikeAt>,
        exported: Option<LikeAt>,
    },
    /// A likers bucket that holds a liked entry of the item and that no count row lists.
    Unlisted { item: ItemId, bucket: u32 },
    /// A reaction to a removed item, still in the export.
    Removed { item: ItemId, user_id: String },
}

pub(super) enum Source {
    Stream(ByteStream),
    #[cfg(test)]
    Chunks(std::vec::IntoIter<Vec<u8>>),
}

/// A judging query's CSV result, read a line at a time as it arrives. Its fields are kinds,
/// item ids, numbers and empty (NULL), none with a comma, quote or newline, but each line is
/// still read as CSV (Athena quotes every field).
pub struct ResultLines {
    location: String,
    source: Option<Source>,
    pending: Vec<u8>,
    line: u64,
    judgement: Judgement,
}

impl ResultLines {
    pub(super) fn new(location: &str, source: Source, judgement: Judgement) -> Self {
        Self {
            location: location.to_owned(),
            source: Some(source),
            pending: Vec::new(),
            line: 0,
            judgement,
        }
    }

    /// The next line, `None` after the last.
    pub async fn next(&mut self) -> Result<Option<JudgedLine>, ReconcileError> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                if let Some(parsed) = self.parse(&line[..end])? {
                    return Ok(Some(parsed));
                }
                continue;
            }
            match self.chunk().await? {
                Some(chunk) => self.pending.extend_from_slice(&chunk),
                None if self.pending.is_empty() => {
                    return if self.line == 0 {
                        Err(self.invalid("empty: no header".into()))
                    } else {
                        Ok(None)
                    };
                }
                None => {
                    let rest = std::mem::take(&mut self.pending);
                    if let Some(parsed) = self.parse(&rest)? {
                        return Ok(Some(parsed));
                    }
                }
            }
        }
    }

    async fn chunk(&mut self) -> Result<Option<Vec<u8>>, ReconcileError> {
        let chunk = match &mut self.source {
            None => None,
            Some(Source::Stream(body)) => body
                .next()
                .await
                .transpose()
                .map_err(|e| self.invalid(format!("reading: {e}")))?
                .map(|bytes| bytes.to_vec()),
            #[cfg(test)]
            Some(Source::Chunks(chunks)) => chunks.next(),
        };
        if chunk.is_none() {
            self.source = None;
        }
        Ok(chunk)
    }

    fn invalid(&self, reason: String) -> ReconcileError {
        ReconcileError::Result {
            location: self.location.clone(),
            reason: format!("line {}: {reason}", self.line),
        }
    }

    /// One line: `None` for the header.
    fn parse(&mut self, line: &[u8]) -> Result<Option<JudgedLine>, ReconcileError> {
        self.line += 1;
        let record = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(line.strip_suffix(b"\r").unwrap_or(line))
            .records()
            .next()
            .transpose()
            .map_err(|e| self.invalid(e.to_string()))?
            .ok_or_else(|| self.invalid("blank".into()))?;
        let fields: Vec<&str> = record.iter().collect();
        let header = match self.judgement {
            Judgement::Counts => COUNTS_HEADER,
            Judgement::Scores => SCORES_HEADER,
            Judgement::Likers => LIKERS_HEADER,
        };
        if self.line == 1 {
            return if fields == header {
                Ok(None)
            } else {
                Err(self.invalid(format!("header {fields:?}, not {header:?}")))
            };
        }
        if fields.len() != header.len() {
            return Err(self.invalid(format!("{} fields, not {}", fields.len(), header.len())));
        }
        let field = |name: &str| fields[header.iter().position(|h| *h == name).expect("a column")];
        let number = |name: &str| {
            let text = field(name);
            text.parse::<u64>()
                .map_err(|_| self.invalid(format!("{name} {text:?} is not a count")))
        };
        let item = || {
            let text = field("item_id");
            ItemId::parse(text).map_err(|_| self.invalid(format!("{text:?} is not an item id")))
        };
        let like_at = |side: &str| -> Result<Option<LikeAt>, ReconcileError> {
            let values = ["created", "op_id", "at"].map(|part| field(&format!("{side}_{part}")));
            if values.iter().all(|v| v.is_empty()) {
                return Ok(None);
            }
            let [created, op_id, at] = values.map(|v| {
                v.parse::<i64>()
                    .map_err(|_| self.invalid(format!("{side} {v:?} is not a number")))
            });
            Ok(Some(LikeAt {
                row_created_ms: created?,
                op_id: u64::try_from(op_id?)
                    .map_err(|_| self.invalid(format!("{side} op_id is negative")))?,
                liked_at_ms: at?,
            }))
        };
        Ok(Some(match (self.judgement, field("kind")) {
            (Judgement::Likers, "repair") => JudgedLine::Liker {
                item: item()?,
                user_id: field("user_id").to_owned(),
                listed: like_at("listed")?,
                exported: like_at("exported")?,
            },
            (Judgement::Likers, "unlisted") => JudgedLine::Unlisted {
                item: item()?,
                bucket: match u32::try_from(number("n")?) {
                    Ok(bucket) if bucket < LIKER_BUCKETS => bucket,
                    _ => return Err(self.invalid(format!("bucket {:?}", field("n")))),
                },
            },
            (Judgement::Likers, "removed") => JudgedLine::Removed {
                item: item()?,
                user_id: field("user_id").to_owned(),
            },
            (Judgement::Likers, "unreadable")
            | (Judgement::Counts | Judgement::Scores, "in_sync" | "deferred" | "drifted")
            | (Judgement::Counts, "rows" | "probes" | "foreign") => JudgedLine::Total {
                kind: field("kind").to_owned(),
                n: number("n")?,
            },
            (Judgement::Counts, "unknown") => JudgedLine::Unknown {
                item_id: field("item_id").to_owned(),
                rows: number("n")?,
            },
            (Judgement::Counts | Judgement::Scores, "drift") => JudgedLine::Drift {
                item: item()?,
                recount: Counts {
                    like_count: number("likes")?,
                    dislike_count: match self.judgement {
                        Judgement::Counts => number("dislikes")?,
                        _ => 0,
                    },
                },
                overflow: match field("n") {
                    "" => 0,
                    text => text
                        .parse()
                        .map_err(|_| self.invalid(format!("overflow {text:?} is not a number")))?,
                },
            },
            (_, other) => return Err(self.invalid(format!("{other:?} is not a kind of line"))),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(
        text: &str,
        chunk: usize,
        judgement: Judgement,
    ) -> Result<Vec<JudgedLine>, ReconcileError> {
        let chunks: Vec<Vec<u8>> = text.as_bytes().chunks(chunk).map(<[u8]>::to_vec).collect();
        let mut lines = ResultLines::new(
            "s3://b/r.csv",
            Source::Chunks(chunks.into_iter()),
            judgement,
        );
        let mut all = Vec::new();
        while let Some(line) = lines.next().await? {
            all.push(line);
        }
        Ok(all)
    }

    const COUNTS: &str = "\"kind\",\"item_id\",\"likes\",\"dislikes\",\"n\"\n\
        \"deferred\",,,,\"1\"\n\
        \"in_sync\",,,,\"7\"\n\
        \"rows\",,,,\"13\"\n\
        \"unknown\",\"game:1\",,,\"2\"\n\
        \"drift\",\"avatar:9\",\"0\",\"2\",\n\
        \"drift\",\"game:1\",\"3\",\"1\",\n";

    fn drift(item: &str, like_count: u64, dislike_count: u64) -> JudgedLine {
        JudgedLine::Drift {
            item: ItemId::parse(item).unwrap(),
            recount: Counts {
                like_count,
                dislike_count,
            },
            overflow: 0,
        }
    }

    #[tokio::test]
    async fn a_result_reads_line_by_line_in_any_chunking() {
        let whole = read(COUNTS, COUNTS.len(), Judgement::Counts).await.unwrap();
        for chunk in [1, 3, 17] {
            assert_eq!(read(COUNTS, chunk, Judgement::Counts).await.unwrap(), whole);
        }
        assert_eq!(whole.len(), 6);
        assert_eq!(
            whole[2],
            JudgedLine::Total {
                kind: "rows".into(),
                n: 13
            }
        );
        assert_eq!(
            whole[3],
            JudgedLine::Unknown {
                item_id: "game:1".into(),
                rows: 2
            }
        );
        assert_eq!(whole[4..], [drift("avatar:9", 0, 2), drift("game:1", 3, 1)]);
        let scores = "\"kind\",\"item_id\",\"likes\",\"n\"\n\"drift\",\"game:1\",\"3\",";
        assert_eq!(
            read(scores, 5, Judgement::Scores).await.unwrap(),
            [drift("game:1", 3, 0)]
        );
    }

    const LIKERS: &str = "\"kind\",\"item_id\",\"user_id\",\"listed_created\",\"listed_op_id\",\
        \"listed_at\",\"exported_created\",\"exported_op_id\",\"exported_at\",\"n\"\n\
        \"unreadable\",,,,,,,,,\"0\"\n\
        \"unlisted\",\"game:1\",,,,,,,,\"255\"\n\
        \"removed\",\"game:2\",\"ann\",,,,,,,\n\
        \"repair\",\"game:3\",\"bob\",,,,\"5\",\"2\",\"9\",\n";

    #[tokio::test]
    async fn a_likers_result_names_buckets_to_list_and_reactions_to_retract() {
        let item = |id: &str| ItemId::parse(id).unwrap();
        assert_eq!(
            read(LIKERS, 7, Judgement::Likers).await.unwrap(),
            [
                JudgedLine::Total {
                    kind: "unreadable".into(),
                    n: 0
                },
                JudgedLine::Unlisted {
                    item: item("game:1"),
                    bucket: 255
                },
                JudgedLine::Removed {
                    item: item("game:2"),
                    user_id: "ann".into()
                },
                JudgedLine::Liker {
                    item: item("game:3"),
                    user_id: "bob".into(),
                    listed: None,
                    exported: Some(LikeAt {
                        row_created_ms: 5,
                        op_id: 2,
                        liked_at_ms: 9
                    }),
                },
            ]
        );
        let past_the_buckets = LIKERS.replace("\"255\"", "\"256\"");
        assert!(matches!(
            read(&past_the_buckets, 64, Judgement::Likers).await,
            Err(ReconcileError::Result { .. })
        ));
    }

    #[tokio::test]
    async fn a_result_that_is_not_the_judges_fails() {
        for wrong in [
            COUNTS.replacen("\"n\"", "\"rows\"", 1),
            String::new(),
            COUNTS.replace("\"13\"", "\"thirteen\""),
            COUNTS.replace("avatar:9", "avatar 9"),
            COUNTS.replace("\"deferred\"", "\"later\""),
            COUNTS.replace(",\"1\"\n", ",\"1\",\"2\"\n"),
        ] {
            assert!(
                matches!(
                    read(&wrong, 64, Judgement::Counts).await,
                    Err(ReconcileError::Result { .. })
                ),
                "{wrong}"
            );
        }
        assert!(matches!(
            read(COUNTS, 64, Judgement::Scores).await,
            Err(ReconcileError::Result { .. })
        ));
    }
}
