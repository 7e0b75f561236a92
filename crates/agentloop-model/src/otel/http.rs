//! The OTLP exporter's transport: `opentelemetry_http::HttpClient` over the ureq the model
//! clients already use, so exporting spans pulls in no second HTTP stack.
//!
//! Every exchange is bounded ([`TIMEOUT`] in all, connecting included): a collector that is down
//! or slow costs the command at most that long at its end, never the run.

use bytes::Bytes;
use http::{Request, Response};
use opentelemetry_http::{HttpClient, HttpError};
use std::io::Read;
use std::time::Duration;

/// The longest one export may take, connecting included.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// A collector's reply is a small protobuf status; more than this is not read.
const MAX_REPLY: u64 = 64 * 1024;

/// A blocking ureq agent behind the exporter's async trait (the SDK's batch processor calls it
/// from its own thread with a blocking executor).
#[derive(Debug)]
pub struct Ureq {
    agent: ureq::Agent,
}

impl Ureq {
    pub fn new() -> Self {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(TIMEOUT))
            .timeout_connect(Some(TIMEOUT / 2))
            .http_status_as_error(false)
            // A redirect would carry the headers (a collector's API key) to another host.
            .max_redirects(0)
            .user_agent(concat!("agentloop/", env!("CARGO_PKG_VERSION")))
            .build();
        Ureq { agent: ureq::Agent::new_with_config(config) }
    }
}

#[async_trait::async_trait]
impl HttpClient for Ureq {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = request.map(|b| b.to_vec());
        let response = self.agent.run(request)?;
        let (parts, body) = response.into_parts();
        let mut reply = Vec::new();
        body.into_reader().take(MAX_REPLY).read_to_end(&mut reply)?;
        Ok(Response::from_parts(parts, Bytes::from(reply)))
    }
}
