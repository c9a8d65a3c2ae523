//! STUB: to be completed.
use futures_util::future::BoxFuture;

use super::{ChatRequest, ChunkStream, LlmError, Provider};

#[derive(Clone, Debug)]
pub struct OpenAiConfig {
    pub provider_name: String,
    pub base_url: String,
    pub model: String,
    pub api_key: Option<String>,
    pub connect_timeout: std::time::Duration,
    pub send_reasoning_content: bool,
    pub temperature: Option<f32>,
    pub extra_headers: Vec<(String, String)>,
}

pub struct OpenAiProvider {
    config: OpenAiConfig,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        Ok(OpenAiProvider { config })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.config.provider_name
    }
    fn model(&self) -> &str {
        &self.config.model
    }
    fn stream(&self, _request: ChatRequest) -> BoxFuture<'_, Result<ChunkStream, LlmError>> {
        Box::pin(async { Err(LlmError::Config("not implemented".into())) })
    }
}
