//! S3, path-style: buckets of objects, enough for what the service writes and reads back
//! (reports, export files): create a bucket, put, get, head, delete and list objects.

use std::collections::BTreeMap;
use std::sync::Mutex;

use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use percent_encoding::percent_decode_str;

use crate::reply::Reply;

const XML: &str = "application/xml";
/// ListObjectsV2 answers at most this many keys a page.
const LIST_PAGE: usize = 1000;

#[derive(Debug, Default)]
pub struct S3 {
    buckets: Mutex<BTreeMap<String, BTreeMap<String, Vec<u8>>>>,
}

impl S3 {
    pub fn answer(&self, request: &HttpRequest, body: &[u8]) -> Reply {
        let uri = request.uri().to_owned();
        let (path, query) = uri_path(&uri)
            .split_once('?')
            .unwrap_or((uri_path(&uri), ""));
        let path = path.trim_start_matches('/');
        let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
        let bucket = decode(bucket);
        let key = decode(key);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if request.method() == "PUT" && key.is_empty() {
            buckets.entry(bucket).or_default();
            return Reply::rest(200, XML, Vec::new());
        }
        let Some(objects) = buckets.get_mut(&bucket) else {
            return no_such("NoSuchBucket", &bucket);
        };
        match (request.method(), key.is_empty()) {
            ("GET", true) => list(objects, query),
            ("PUT", false) => {
                let content = match request.headers().get("content-encoding") {
                    Some(encoding) if encoding.contains("aws-chunked") => unchunk(body),
                    _ => body.to_vec(),
                };
                let etag = format!("\"{:x}\"", md5::compute(&content));
                objects.insert(key, content);
                Reply::rest(200, XML, Vec::new()).header("etag", etag)
            }
            ("GET" | "HEAD", false) => match objects.get(&key) {
                Some(content) => {
                    let etag = format!("\"{:x}\"", md5::compute(content));
                    let body = if request.method() == "GET" {
                        content.clone()
                    } else {
                        Vec::new()
                    };
                    Reply::rest(200, "application/octet-stream", body)
                        .header("etag", etag)
                        .header("content-length", content.len().to_string())
                }
                None => no_such("NoSuchKey", &key),
            },
            ("DELETE", false) => {
                objects.remove(&key);
                Reply::rest(204, XML, Vec::new())
            }
            (method, _) => Reply::rest(
                405,
                XML,
                error_xml("MethodNotAllowed", &format!("{method} is not simulated")),
            ),
        }
    }
}

fn uri_path(uri: &str) -> &str {
    uri.split_once("://")
        .map_or(uri, |(_, rest)| rest.find('/').map_or("", |i| &rest[i..]))
}

fn decode(text: &str) -> String {
    percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// ListObjectsV2: the keys under `prefix`, after `continuation-token` or `start-after`.
fn list(objects: &BTreeMap<String, Vec<u8>>, query: &str) -> Reply {
    let parameters: BTreeMap<String, String> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(name, value)| (decode(name), decode(value)))
        .collect();
    let prefix = parameters.get("prefix").cloned().unwrap_or_default();
    let after = parameters
        .get("continuation-token")
        .or_else(|| parameters.get("start-after"))
        .cloned()
        .unwrap_or_default();
    let matching: Vec<_> = objects
        .iter()
        .filter(|(key, _)| key.starts_with(&prefix) && key.as_str() > after.as_str())
        .collect();
    let page = &matching[..matching.len().min(LIST_PAGE)];
    let truncated = matching.len() > page.len();
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
    );
    xml.push_str(&format!(
        "<Prefix>{}</Prefix><KeyCount>{}</KeyCount><IsTruncated>{truncated}</IsTruncated>",
        escape(&prefix),
        page.len()
    ));
    if let (true, Some((last, _))) = (truncated, page.last()) {
        xml.push_str(&format!(
            "<NextContinuationToken>{}</NextContinuationToken>",
            escape(last)
        ));
    }
    for (key, content) in page {
        xml.push_str(&format!(
            "<Contents><Key>{}</Key><Size>{}</Size></Contents>",
            escape(key),
            content.len()
        ));
    }
    xml.push_str("</ListBucketResult>");
    Reply::rest(200, XML, xml.into_bytes())
}

/// The payload of an `aws-chunked` body: each chunk's data, without the sizes,
/// signatures and trailing checksums around them.
fn unchunk(body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(end) = rest.windows(2).position(|w| w == b"\r\n") {
        let header = String::from_utf8_lossy(&rest[..end]);
        let size = header
            .split(';')
            .next()
            .and_then(|hex| usize::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = end + 2;
        let Some(chunk) = rest.get(start..start + size) else {
            break;
        };
        content.extend_from_slice(chunk);
        rest = rest.get(start + size + 2..).unwrap_or_default();
    }
    content
}

fn no_such(code: &str, name: &str) -> Reply {
    Reply::rest(404, XML, error_xml(code, &format!("{name} does not exist")))
}

fn error_xml(code: &str, message: &str) -> Vec<u8> {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>\
         <Message>{}</Message></Error>",
        escape(message)
    )
    .into_bytes()
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
