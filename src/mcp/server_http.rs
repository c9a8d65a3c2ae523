//! `vibedesk mcp serve --http ADDR` (docs §13.4.2): `rmcp`'s streamable HTTP
//! service on hyper, at `/mcp`. Only whom the user chose gets in: every
//! request carries a bearer token (generated on first use and kept in a
//! 0600 file, or taken from `--bearer-token-env`; `--no-token` opts out on
//! loopback only), a browser `Origin` other than the server's own is
//! refused, the address is loopback unless `--allow-remote`, and sessions
//! are capped and expire when idle.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::Stream;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::server::VibedeskServer;

/// The HTTP path the MCP endpoint answers on.
pub const MCP_PATH: &str = "/mcp";
/// The token file, in the config dir (docs §13.4.2).
pub const TOKEN_FILE: &str = "mcp-serve.token";
/// Default cap on open HTTP sessions (about 60 KB each).
pub const DEFAULT_MAX_SESSIONS: u32 = 64;
/// Default idle time after which a session is closed.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);
/// Default time a connection has to send a request's headers.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default cap on connections open at once from one client address.
pub const DEFAULT_MAX_CLIENT_CONNECTIONS: u32 = 32;
/// Default cap on connections open at once from everyone.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 512;

/// Who may connect, as the command line chose.
#[derive(Clone, Debug, PartialEq)]
pub enum Auth {
    /// `--bearer-token-env VAR`: this token.
    Token(String),
    /// The token kept in the token file, made on first use.
    Stored,
    /// `--no-token` (loopback only): anyone who can reach the port.
    Off,
}

/// Where and how to listen, checked before anything else starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Listen {
    pub addr: SocketAddr,
    pub auth: Auth,
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
    #[error("--no-token is for loopback addresses only: {addr} can be reached from other machines")]
    NoTokenRemote { addr: SocketAddr },
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
    /// Checks an `--http` address and how clients prove themselves: a token
    /// read from the variable `token_env` names (looked up with `env`), no
    /// token (`no_token`, loopback only), or the stored one. A non-loopback
    /// address needs `allow_remote` and `token_env`.
    pub fn check(
        addr: SocketAddr,
        allow_remote: bool,
        token_env: Option<&str>,
        no_token: bool,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Listen, ListenError> {
        if !addr.ip().is_loopback() {
            if no_token {
                return Err(ListenError::NoTokenRemote { addr });
            }
            if !allow_remote {
                return Err(ListenError::NotLoopback { addr });
            }
            if token_env.is_none() {
                return Err(ListenError::RemoteWithoutToken);
            }
        }
        let auth = match token_env {
            Some(var) => Auth::Token(env(var).filter(|t| !t.is_empty()).ok_or_else(|| {
                ListenError::TokenUnset {
                    var: var.to_string(),
                }
            })?),
            None if no_token => Auth::Off,
            None => Auth::Stored,
        };
        Ok(Listen { addr, auth })
    }
}

/// Why the stored token could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("cannot {action} the MCP token file {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the MCP token file {path} does not hold a token; delete it and start `vibedesk mcp serve --http` again for a new one"
    )]
    Damaged { path: PathBuf },
}

/// The token of the token file, and whether this call made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredToken {
    pub token: String,
    pub created: bool,
}

/// The token kept at `path`, made when there is none yet: 32 random bytes
/// as hex, written with mode 0600 (created exclusively, so two servers
/// starting at once agree on one). A file others may read is set back to
/// 0600.
pub fn stored_token(path: &Path) -> Result<StoredToken, TokenFileError> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let io = |action, source| TokenFileError::Io {
        action,
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| io("create the folder of", e))?;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Ok(mut file) => {
            let token = new_token();
            file.write_all(format!("{token}\n").as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| io("write", e))?;
            return Ok(StoredToken {
                token,
                created: true,
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("create", e)),
    }
    let meta = std::fs::metadata(path).map_err(|e| io("read", e))?;
    if meta.permissions().mode() & 0o077 != 0 {
        tracing::warn!(path = %path.display(), "the MCP token file was readable by others; set to 0600");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| io("restrict", e))?;
    }
    let text = std::fs::read_to_string(path).map_err(|e| io("read", e))?;
    let token = text.trim();
    if token.len() < 32
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(TokenFileError::Damaged {
            path: path.to_path_buf(),
        });
    }
    Ok(StoredToken {
        token: token.to_string(),
        created: false,
    })
}

/// 256 random bits as 64 hex digits.
fn new_token() -> String {
    format!(
        "{:032x}{:032x}",
        rand::random::<u128>(),
        rand::random::<u128>()
    )
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

/// How many HTTP sessions may be open and how long one may sit idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    pub max_sessions: usize,
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: DEFAULT_MAX_SESSIONS as usize,
            idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// `rmcp`'s in-memory sessions with a cap: a new session past `cap` is
/// refused (open ones are never evicted: a working client keeps its
/// session), and each closes after `idle` without a message (rmcp's
/// keep-alive), which frees its place.
struct CappedSessions {
    inner: LocalSessionManager,
    cap: usize,
    /// Serialises the count-then-create of new sessions.
    creating: tokio::sync::Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
enum SessionsError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error("{cap} MCP sessions are open, the most this server allows")]
    Full { cap: usize },
}

impl CappedSessions {
    fn new(limits: SessionLimits) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(limits.idle);
        CappedSessions {
            inner,
            cap: limits.max_sessions,
            creating: tokio::sync::Mutex::new(()),
        }
    }

    async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        if self.open().await >= self.cap {
            return Err(SessionsError::Full { cap: self.cap });
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

/// The origins a browser page of this server itself would send: its
/// loopback address by every name, on the bound port.
fn own_origins(bound: SocketAddr) -> Vec<String> {
    let port = bound.port();
    ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect()
}

/// What a connection may hold (docs §13.4.2): the time it has to send a
/// request's headers, and how many may be open from one client address and
/// from everyone. Past a cap a new connection gets a 503 and is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    pub header_timeout: Duration,
    pub per_client: usize,
    pub total: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            per_client: DEFAULT_MAX_CLIENT_CONNECTIONS as usize,
            total: DEFAULT_MAX_CONNECTIONS as usize,
        }
    }
}

/// The connections open now, by client address; a [`Slot`] is one of them.
#[derive(Default)]
struct Connections {
    open: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// Why a connection gets no place (said in its 503).
#[derive(Debug, thiserror::Error)]
enum Refused {
    #[error("the connection table is unavailable")]
    TableUnavailable,
    #[error(
        "{open} connections from {ip} are open, the most one client may hold (--max-client-connections)"
    )]
    PerClient { open: usize, ip: std::net::IpAddr },
    #[error("{0} connections are open, the most this server allows (--max-connections)")]
    Total(usize),
}

/// One open connection's place, given back when it closes.
struct Slot {
    connections: Arc<Connections>,
    ip: std::net::IpAddr,
}

impl Connections {
    /// A place for a connection from `ip`, or why there is none.
    fn admit(
        self: &Arc<Self>,
        ip: std::net::IpAddr,
        limits: &ConnectionLimits,
    ) -> Result<Slot, Refused> {
        let Ok(mut open) = self.open.lock() else {
            return Err(Refused::TableUnavailable);
        };
        let total: usize = open.values().sum();
        let mine = open.get(&ip).copied().unwrap_or(0);
        if mine >= limits.per_client {
            return Err(Refused::PerClient { open: mine, ip });
        }
        if total >= limits.total {
            return Err(Refused::Total(total));
        }
        open.insert(ip, mine + 1);
        Ok(Slot {
            connections: self.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.connections.open.lock()
            && let Some(n) = open.get_mut(&self.ip)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Refuses a connection past a cap: a 503 saying which, written only if
/// the socket takes it at once (a client that reads nothing holds no task),
/// then closed.
fn refuse(stream: tokio::net::TcpStream, why: &str) {
    let body = format!("{why}\n");
    let reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(reply.as_bytes());
}

/// What the server needs besides the tools: the token (none only with
/// `--no-token`), the session limits and the connection limits.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    pub bearer_token: Option<String>,
    pub limits: SessionLimits,
    pub connections: ConnectionLimits,
}

/// Serves MCP over HTTP until `cancel` fires. `on_ready` gets the bound
/// address (port 0 picks one) once the socket listens.
pub async fn serve_http(
    server: VibedeskServer,
    options: HttpOptions,
    cancel: CancellationToken,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<(), ListenError> {
    let addr = options.addr;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ListenError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone());
    config = if addr.ip().is_loopback() {
        // rmcp's Host check guards against DNS rebinding; a page of another
        // origin (a browser's `Origin`) gets 403.
        config
            .with_allowed_origins(own_origins(bound))
            .enforce_origin_validation()
    } else {
        // A remote server is reached by names we cannot know, and the
        // token guards it; no browser page is let in at all.
        config
            .disable_allowed_hosts()
            .with_allowed_origins(Vec::<String>::new())
            .enforce_origin_validation()
    };
    let sessions = Arc::new(CappedSessions::new(options.limits));
    let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
    let token: Option<Arc<str>> = options.bearer_token.map(Arc::from);
    let limits = options.connections;
    let connections = Arc::new(Connections::default());
    on_ready(bound);
    loop {
        let (stream, peer) = tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors (EMFILE) the error repeats at once:
                    // a pause keeps the loop from spinning.
                    tracing::warn!("mcp serve: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Caps per client address and overall (docs §13.4.2).
        let slot = match connections.admit(peer.ip(), &limits) {
            Ok(slot) => slot,
            Err(why) => {
                tracing::debug!("mcp serve: refused a connection: {why}");
                refuse(stream, &why.to_string());
                continue;
            }
        };
        let service = TowerToHyperService::new(service.clone());
        let token = token.clone();
        let sessions = sessions.clone();
        let handler = hyper::service::service_fn(move |req: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            let sessions = sessions.clone();
            async move {
                use hyper::service::Service as _;
                if let Some(refusal) = gate(&req, token.as_deref(), &sessions).await {
                    return Ok(refusal);
                }
                service.call(req).await
            }
        });
        tokio::spawn(async move {
            let _slot = slot;
            // A request's headers must arrive within the timeout, or the
            // connection is closed (hyper needs a timer for it).
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), handler);
            if let Err(e) = conn.await {
                tracing::debug!("mcp serve: connection ended: {e}");
            }
        });
    }
}

/// The answer for a request that may not reach rmcp: another path (404),
/// no or a wrong token (401), or a new session past the cap (503, saying
/// when places free up). rmcp then checks `Host` and `Origin` (403).
async fn gate(
    req: &Request<Incoming>,
    token: Option<&str>,
    sessions: &CappedSessions,
) -> Option<Response<Body>> {
    if req.uri().path() != MCP_PATH {
        return Some(plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp\n"));
    }
    if let Some(token) = token {
        let header = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if !bearer_matches(header, token) {
            return Some(plain(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer <token>; see `vibedesk mcp serve --help`)\n",
            ));
        }
    }
    let opens_session =
        req.method() == hyper::Method::POST && !req.headers().contains_key("mcp-session-id");
    if opens_session && sessions.open().await >= sessions.cap {
        let idle = sessions.inner.session_config.keep_alive.unwrap_or_default();
        return Some(plain(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!(
                "{} MCP sessions are open, the most this server allows (--max-sessions); an idle one closes after {} s, or a client may end its session (HTTP DELETE)\n",
                sessions.cap,
                idle.as_secs()
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_uses_the_stored_token_unless_told_otherwise() {
        let none = |_: &str| None;
        let ok = Listen::check(addr("127.0.0.1:8808"), false, None, false, none).unwrap();
        assert_eq!(ok.auth, Auth::Stored);
        let off = Listen::check(addr("[::1]:8808"), false, None, true, none).unwrap();
        assert_eq!(off.auth, Auth::Off);

        let e = Listen::check(addr("0.0.0.0:8808"), false, None, false, none).unwrap_err();
        assert!(matches!(e, ListenError::NotLoopback { .. }));
        assert!(e.is_usage());
        assert!(e.to_string().contains("--allow-remote"), "{e}");

        let e = Listen::check(addr("0.0.0.0:8808"), true, None, false, none).unwrap_err();
        assert!(matches!(e, ListenError::RemoteWithoutToken));
        let e = Listen::check(addr("0.0.0.0:8808"), true, None, true, none).unwrap_err();
        assert!(matches!(e, ListenError::NoTokenRemote { .. }), "{e}");

        let e = Listen::check(addr("0.0.0.0:8808"), true, Some("TOK"), false, none).unwrap_err();
        assert!(matches!(e, ListenError::TokenUnset { .. }));

        let env = |v: &str| (v == "TOK").then(|| "s3cret".to_string());
        let remote = Listen::check(addr("0.0.0.0:8808"), true, Some("TOK"), false, env).unwrap();
        assert_eq!(remote.auth, Auth::Token("s3cret".into()));
        let local = Listen::check(addr("127.0.0.1:0"), false, Some("TOK"), false, env).unwrap();
        assert_eq!(local.auth, Auth::Token("s3cret".into()));
    }

    #[test]
    fn the_stored_token_is_made_once_private_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join(TOKEN_FILE);
        let first = stored_token(&path).unwrap();
        assert!(first.created);
        assert_eq!(first.token.len(), 64);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = stored_token(&path).unwrap();
        assert_eq!(
            again,
            StoredToken {
                token: first.token.clone(),
                created: false
            }
        );
        // Opened up by hand: set back to 0600 and still used.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(stored_token(&path).unwrap().token, first.token);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::write(&path, "short\n").unwrap();
        let e = stored_token(&path).unwrap_err();
        assert!(matches!(e, TokenFileError::Damaged { .. }), "{e}");
        assert!(e.to_string().contains("delete it"), "{e}");
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
