//! `vibedesk mcp serve --http ADDR` (docs §13.4.2): `rmcp`'s streamable HTTP
//! service on hyper, at `/mcp`. Loopback only unless `--allow-remote`, which
//! needs a bearer token that every request must then carry.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::server::VibedeskServer;

/// The HTTP path the MCP endpoint answers on.
pub const MCP_PATH: &str = "/mcp";

/// Where and how to listen, checked before anything else starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Listen {
    pub addr: SocketAddr,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error(
        "refusing to serve MCP on {addr}: it is not a loopback address, so other machines could run tools here. Use 127.0.0.1, or pass --allow-remote with --bearer-token-env VAR"
    )]
    NotLoopback { addr: SocketAddr },
    #[error(
        "--allow-remote needs --bearer-token-env VAR: a remote client must prove itself with that token"
    )]
    RemoteWithoutToken,
    #[error("--bearer-token-env {var}: the variable is not set or empty")]
    TokenUnset { var: String },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

impl ListenError {
    /// A refusal of the command line as given (exit code 2), not a failure.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ListenError::Bind { .. })
    }
}

impl Listen {
    /// Checks an `--http` address: loopback, or remote with a bearer token
    /// read from the variable `token_env` names (looked up with `env`).
    pub fn check(
        addr: SocketAddr,
        allow_remote: bool,
        token_env: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Listen, ListenError> {
        if !addr.ip().is_loopback() {
            if !allow_remote {
                return Err(ListenError::NotLoopback { addr });
            }
            if token_env.is_none() {
                return Err(ListenError::RemoteWithoutToken);
            }
        }
        let bearer_token =
            match token_env {
                None => None,
                Some(var) => Some(env(var).filter(|t| !t.is_empty()).ok_or_else(|| {
                    ListenError::TokenUnset {
                        var: var.to_string(),
                    }
                })?),
            };
        Ok(Listen { addr, bearer_token })
    }
}

/// Whether `header` (an `Authorization` value) carries `token`; compared
/// without an early exit so the time taken says nothing about the token.
fn bearer_matches(header: Option<&str>, token: &str) -> bool {
    let Some(given) = header.and_then(|h| h.strip_prefix("Bearer ")) else {
        return false;
    };
    let (a, b) = (given.trim().as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *response.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

/// Serves MCP over HTTP until `cancel` fires. `on_ready` gets the bound
/// address (port 0 picks one) once the socket listens.
pub async fn serve_http(
    server: VibedeskServer,
    listen: Listen,
    cancel: CancellationToken,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ListenError> {
    let listener = TcpListener::bind(listen.addr)
        .await
        .map_err(|source| ListenError::Bind {
            addr: listen.addr,
            source,
        })?;
    let bound = listener.local_addr().unwrap_or(listen.addr);
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone());
    // Loopback keeps rmcp's Host check against DNS rebinding; a remote
    // server is reached by names we cannot know, and the token guards it.
    if !listen.addr.ip().is_loopback() {
        config = config.disable_allowed_hosts();
    }
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token: Option<Arc<str>> = listen.bearer_token.map(Arc::from);
    on_ready(bound);
    loop {
        let stream = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("mcp serve: accept failed: {e}");
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(service.clone());
        let token = token.clone();
        let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            async move {
                use hyper::service::Service as _;
                if req.uri().path() != MCP_PATH {
                    return Ok(plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp\n"));
                }
                if let Some(token) = &token {
                    let header = req
                        .headers()
                        .get(hyper::header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok());
                    if !bearer_matches(header, token) {
                        return Ok(plain(
                            StatusCode::UNAUTHORIZED,
                            "a bearer token is required\n",
                        ));
                    }
                }
                service.call(req).await
            }
        });
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler);
            if let Err(e) = conn.await {
                tracing::debug!("mcp serve: connection ended: {e}");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_loopback_is_served_without_a_token() {
        let none = |_: &str| None;
        let ok = Listen::check(addr("127.0.0.1:8808"), false, None, none).unwrap();
        assert_eq!(ok.bearer_token, None);
        assert!(Listen::check(addr("[::1]:8808"), false, None, none).is_ok());

        let e = Listen::check(addr("0.0.0.0:8808"), false, None, none).unwrap_err();
        assert!(matches!(e, ListenError::NotLoopback { .. }));
        assert!(e.is_usage());
        assert!(e.to_string().contains("--allow-remote"), "{e}");

        let e = Listen::check(addr("0.0.0.0:8808"), true, None, none).unwrap_err();
        assert!(matches!(e, ListenError::RemoteWithoutToken));

        let e = Listen::check(addr("0.0.0.0:8808"), true, Some("TOK"), none).unwrap_err();
        assert!(matches!(e, ListenError::TokenUnset { .. }));

        let env = |v: &str| (v == "TOK").then(|| "s3cret".to_string());
        let remote = Listen::check(addr("0.0.0.0:8808"), true, Some("TOK"), env).unwrap();
        assert_eq!(remote.bearer_token.as_deref(), Some("s3cret"));
        // A token on loopback is required too.
        let local = Listen::check(addr("127.0.0.1:0"), false, Some("TOK"), env).unwrap();
        assert_eq!(local.bearer_token.as_deref(), Some("s3cret"));
    }

    #[test]
    fn bearer_tokens_must_match_exactly() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cretx"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }
}
