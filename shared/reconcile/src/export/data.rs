//! One data file, streamed: its bytes go through the MD5 and the gzip decoder as they arrive,
//! and every whole line is added to the recount at once, so memory holds one chunk and one
//! partial line, not the file.

use std::io::Write;

use flate2::write::MultiGzDecoder;
use md5::{Digest, Md5};

use super::manifest::{md5_base64, DataFile};
use super::row::Recount;
use crate::ReconcileError;

pub(crate) struct DataFileStream<'a> {
    file: &'a DataFile,
    md5: Md5,
    /// Decompressed bytes not yet cut into lines: at most one chunk's worth plus a partial line.
    gunzip: MultiGzDecoder<Vec<u8>>,
    lines: u64,
    rows_before: u64,
    recount: &'a mut Recount,
}

impl<'a> DataFileStream<'a> {
    pub(crate) fn new(file: &'a DataFile, recount: &'a mut Recount) -> Self {
        Self {
            file,
            md5: Md5::new(),
            gunzip: MultiGzDecoder::new(Vec::new()),
            lines: 0,
            rows_before: recount.rows_read,
            recount,
        }
    }

    fn key(&self) -> &'a str {
        &self.file.data_file_s3_key
    }

    /// The next bytes of the object, as S3 sends them.
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<(), ReconcileError> {
        self.md5.update(chunk);
        self.gunzip
            .write_all(chunk)
            .map_err(|e| self.gzip_error(e))?;
        self.add_whole_lines()
    }

    /// The object ended: checks the gzip stream is whole, the MD5 and the item count.
    pub(crate) fn finish(mut self) -> Result<(), ReconcileError> {
        // A stream cut short ends inside a deflate block or before the trailer (CRC-32 and
        // length), which `try_finish` reports; a whole one has been checked against its CRC.
        self.gunzip.try_finish().map_err(|e| self.gzip_error(e))?;
        self.add_whole_lines()?;
        let rest = std::mem::take(self.gunzip.get_mut());
        if !rest.is_empty() {
            // The last line, when the file does not end in a newline.
            self.lines += 1;
            self.recount.add_line(self.key(), self.lines, &rest)?;
        }
        let actual = md5_base64(&self.md5.finalize_reset());
        if actual != self.file.md5_checksum {
            return Err(ReconcileError::Checksum {
                key: self.key().to_owned(),
                expected: self.file.md5_checksum.clone(),
                actual,
            });
        }
        let read = self.recount.rows_read - self.rows_before;
        if read != self.file.item_count {
            return Err(ReconcileError::ItemCount {
                key: self.key().to_owned(),
                expected: self.file.item_count,
                read,
            });
        }
        Ok(())
    }

    fn add_whole_lines(&mut self) -> Result<(), ReconcileError> {
        let key = self.key();
        let buffer = self.gunzip.get_mut();
        let Some(end) = buffer.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        for line in buffer[..end].split(|&b| b == b'\n') {
            self.lines += 1;
            self.recount.add_line(key, self.lines, line)?;
        }
        buffer.drain(..=end);
        Ok(())
    }

    fn gzip_error(&self, source: std::io::Error) -> ReconcileError {
        ReconcileError::Gzip {
            key: self.key().to_owned(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use flate2::write::GzEncoder;
    use flate2::Compression;

    use super::*;

    fn gzip(text: &str) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap()
    }

    fn rows(n: usize) -> String {
        (0..n)
            .map(|i| {
                format!(
                    "{{\"Item\":{{\"user_id\":{{\"S\":\"u{i}\"}},\"item_id\":{{\"S\":\"game:{}\"}},\"state\":{{\"S\":\"LIKE\"}}}}}}\n",
                    i % 3
                )
            })
            .collect()
    }

    fn file(bytes: &[u8], item_count: u64) -> DataFile {
        DataFile {
            data_file_s3_key: "p/AWSDynamoDB/1-a/data/f.json.gz".into(),
            item_count,
            md5_checksum: md5_base64(&Md5::digest(bytes)),
            etag: String::new(),
        }
    }

    /// Streams `bytes` in chunks of `chunk` bytes.
    fn stream(file: &DataFile, bytes: &[u8], chunk: usize) -> Result<Recount, ReconcileError> {
        let mut recount = Recount::default();
        let mut stream = DataFileStream::new(file, &mut recount);
        for piece in bytes.chunks(chunk) {
            stream.feed(piece)?;
        }
        stream.finish()?;
        Ok(recount)
    }

    #[test]
    fn a_file_reads_the_same_in_any_chunking() {
        let bytes = gzip(&rows(50));
        let file = file(&bytes, 50);
        let whole = stream(&file, &bytes, bytes.len()).unwrap();
        for chunk in [1, 7, 64] {
            assert_eq!(stream(&file, &bytes, chunk).unwrap(), whole);
        }
        assert_eq!(whole.rows_read, 50);
        assert_eq!(whole.per_item.len(), 3);
    }

    #[test]
    fn an_empty_file_is_an_empty_gzip_stream_and_a_last_line_needs_no_newline() {
        let empty = gzip("");
        assert_eq!(stream(&file(&empty, 0), &empty, 8).unwrap().rows_read, 0);
        let unterminated = gzip(rows(2).trim_end());
        let recount = stream(&file(&unterminated, 2), &unterminated, 5).unwrap();
        assert_eq!(recount.rows_read, 2);
    }

    #[test]
    fn a_truncated_or_corrupt_stream_fails_even_when_its_md5_matches() {
        let bytes = gzip(&rows(20));
        for cut in [bytes.len() - 4, bytes.len() / 2, 5, 0] {
            let truncated = &bytes[..cut];
            let err = stream(&file(truncated, 20), truncated, 16).unwrap_err();
            assert!(
                matches!(err, ReconcileError::Gzip { .. }),
                "cut at {cut}: {err}"
            );
        }
        let mut corrupt = bytes.clone();
        let middle = corrupt.len() / 2;
        corrupt[middle] ^= 0xff;
        // Garbled deflate data fails to inflate, or inflates to bytes that fail the CRC-32 at
        // the end (or to lines that are not rows first).
        assert!(stream(&file(&corrupt, 20), &corrupt, 16).is_err());
    }

    #[test]
    fn a_wrong_md5_or_item_count_fails() {
        let bytes = gzip(&rows(3));
        let mut wrong_md5 = file(&bytes, 3);
        wrong_md5.md5_checksum = md5_base64(&Md5::digest(b"other"));
        assert!(matches!(
            stream(&wrong_md5, &bytes, 16),
            Err(ReconcileError::Checksum { .. })
        ));
        assert!(matches!(
            stream(&file(&bytes, 4), &bytes, 16),
            Err(ReconcileError::ItemCount {
                expected: 4,
                read: 3,
                ..
            })
        ));
    }
}
