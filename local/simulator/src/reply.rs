//! What the simulated services answer: a status, a body and its content type, as the
//! SDK's deserializers read them from AWS.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;
use serde::Serialize;

/// The content type of AWS's JSON protocols (the 1.0 and 1.1 variants read alike).
const AMZ_JSON: &str = "application/x-amz-json-1.0";

#[derive(Debug)]
pub struct Reply {
    status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Reply {
    /// 200 with `body` as JSON.
    pub fn json(body: &impl Serialize) -> Self {
        match serde_json::to_vec(body) {
            Ok(body) => Self {
                status: 200,
                content_type: AMZ_JSON,
                headers: Vec::new(),
                body,
            },
            Err(e) => Self::error(500, "InternalFailure", &e.to_string()),
        }
    }

    /// 200 with a JSON body already written.
    pub fn json_text(body: String) -> Self {
        Self {
            status: 200,
            content_type: AMZ_JSON,
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// An error of a JSON protocol: `__type` names it, as AWS's do.
    pub fn error(status: u16, error_type: &str, message: &str) -> Self {
        Self::error_body(
            status,
            serde_json::json!({ "__type": error_type, "message": message }).to_string(),
        )
    }

    /// An error whose JSON body is already written.
    pub fn error_body(status: u16, body: String) -> Self {
        Self {
            status,
            content_type: AMZ_JSON,
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    pub fn bad_request(message: &str) -> Self {
        Self::error(400, "ValidationException", message)
    }

    pub fn unknown_operation(target: &str) -> Self {
        Self::error(
            400,
            "UnknownOperationException",
            &format!("{target} is not simulated"),
        )
    }

    /// A REST answer (S3): any status, body and content type.
    pub fn rest(status: u16, content_type: &'static str, body: Vec<u8>) -> Self {
        Self {
            status,
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn body(&self) -> &[u8] {
        &self.body
    }

    pub fn header(mut self, name: &'static str, value: String) -> Self {
        self.headers.push((name, value));
        self
    }
}

impl From<Reply> for HttpResponse {
    fn from(reply: Reply) -> Self {
        let status = StatusCode::try_from(reply.status)
            .unwrap_or_else(|_| StatusCode::try_from(500).expect("500 is a status code"));
        let mut response = HttpResponse::new(status, SdkBody::from(reply.body));
        response
            .headers_mut()
            .insert("content-type", reply.content_type);
        for (name, value) in reply.headers {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// The request's JSON body as `T`, or the 400 AWS answers to a body it cannot read.
pub fn read<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, Reply> {
    serde_json::from_slice(body)
        .map_err(|e| Reply::error(400, "SerializationException", &e.to_string()))
}
