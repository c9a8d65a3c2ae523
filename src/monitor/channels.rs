//! Where a monitor's verdict goes (docs §21.4), named as URIs: `file:PATH`
//! (the latest delivery, written atomically), `webhook:URL` (a JSON POST
//! signed with HMAC-SHA256) and `email:ADDR` (SMTP with STARTTLS). Every
//! send carries the delivery's idempotency key, so a receiver can drop the
//! repeat a crash between sending and recording may cause.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::settings::{MonitorSettings, SmtpSettings, StartTls};

/// The header naming the delivery's idempotency key.
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";
/// The header with `sha256=<hex HMAC-SHA256 of the body>`.
pub const SIGNATURE_HEADER: &str = "X-Vibedesk-Signature";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Channel {
    File(PathBuf),
    Webhook(String),
    Email(String),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    #[error(
        "channel '{0}': name it as file:PATH, webhook:URL or email:ADDRESS (e.g. webhook:https://example.com/hook)"
    )]
    Unknown(String),
    #[error("channel '{0}': the file path is empty")]
    EmptyPath(String),
    #[error("channel '{0}': not an http(s) URL")]
    BadUrl(String),
    #[error("channel '{0}': not an email address")]
    BadAddress(String),
}

impl FromStr for Channel {
    type Err = ChannelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let raw = s.trim();
        let (scheme, rest) = raw
            .split_once(':')
            .ok_or_else(|| ChannelError::Unknown(raw.to_string()))?;
        match scheme {
            "file" if rest.trim().is_empty() => Err(ChannelError::EmptyPath(raw.to_string())),
            "file" => Ok(Channel::File(PathBuf::from(rest))),
            "webhook" => match reqwest::Url::parse(rest) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                    Ok(Channel::Webhook(rest.to_string()))
                }
                _ => Err(ChannelError::BadUrl(raw.to_string())),
            },
            "email" | "mailto" => rest
                .parse::<lettre::Address>()
                .map(|a| Channel::Email(a.to_string()))
                .map_err(|_| ChannelError::BadAddress(raw.to_string())),
            _ => Err(ChannelError::Unknown(raw.to_string())),
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Channel::File(p) => write!(f, "file:{}", p.display()),
            Channel::Webhook(u) => write!(f, "webhook:{u}"),
            Channel::Email(a) => write!(f, "email:{a}"),
        }
    }
}

/// Why a send failed; a message safe to keep and show (no secret in it).
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    #[error("{0}")]
    Channel(#[from] ChannelError),
    #[error("write {0}")]
    File(#[from] crate::fsio::IoError),
    #[error("webhook: {0}")]
    Http(String),
    #[error("webhook answered {0}")]
    Status(u16),
    #[error("email: no [smtp] section in config.toml")]
    NoSmtp,
    #[error("email: {0}")]
    Smtp(String),
}

/// What one delivery sends: its key, the JSON body, and the subject and
/// text an email carries.
#[derive(Clone, Debug)]
pub struct Outgoing<'a> {
    pub key: &'a str,
    pub body: &'a str,
    pub subject: &'a str,
    pub text: &'a str,
}

/// The connections every send reuses.
pub struct Senders {
    http: reqwest::Client,
    settings: MonitorSettings,
}

impl Senders {
    pub fn new(settings: MonitorSettings) -> Result<Self, SendError> {
        let http = reqwest::Client::builder()
            .timeout(settings.send_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| SendError::Http(e.to_string()))?;
        Ok(Senders { http, settings })
    }

    pub async fn send(&self, channel: &Channel, out: &Outgoing<'_>) -> Result<(), SendError> {
        match channel {
            Channel::File(path) => {
                crate::fsio::write_atomic(
                    path,
                    out.body.as_bytes(),
                    crate::fsio::Durability::Synced,
                )?;
                Ok(())
            }
            Channel::Webhook(url) => self.post(url, out).await,
            Channel::Email(to) => {
                let smtp = self.settings.smtp.as_ref().ok_or(SendError::NoSmtp)?;
                send_email(smtp, &self.settings, to, out).await
            }
        }
    }

    async fn post(&self, url: &str, out: &Outgoing<'_>) -> Result<(), SendError> {
        let mut req = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(IDEMPOTENCY_HEADER, out.key)
            .body(out.body.to_string());
        if let Some(secret) = self.settings.webhook_secret() {
            req = req.header(
                SIGNATURE_HEADER,
                signature(secret.as_bytes(), out.body.as_bytes()),
            );
        }
        // reqwest's error names the URL, never a header: safe to keep.
        let resp = req
            .send()
            .await
            .map_err(|e| SendError::Http(e.without_url().to_string()))?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else {
            Err(SendError::Status(status.as_u16()))
        }
    }
}

async fn send_email(
    smtp: &SmtpSettings,
    settings: &MonitorSettings,
    to: &str,
    out: &Outgoing<'_>,
) -> Result<(), SendError> {
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::transport::smtp::client::{Tls, TlsParameters};
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

    let fail = |e: &dyn fmt::Display| SendError::Smtp(e.to_string());
    let tls = match smtp.starttls {
        StartTls::Never => Tls::None,
        // Without a usable certificate store the upgrade cannot happen; the
        // mail goes in the clear, which is what opportunistic accepts.
        StartTls::Opportunistic => {
            TlsParameters::new(smtp.host.clone()).map_or(Tls::None, Tls::Opportunistic)
        }
        StartTls::Required => {
            Tls::Required(TlsParameters::new(smtp.host.clone()).map_err(|e| fail(&e))?)
        }
    };
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(smtp.host.as_str())
        .port(smtp.port)
        .tls(tls)
        .timeout(Some(settings.send_timeout));
    if let Some(user) = &smtp.user {
        let password = crate::secrets::var(&smtp.password_env).unwrap_or_default();
        builder = builder.credentials(Credentials::new(user.clone(), password));
    }
    let mailer = builder.build();
    let from: lettre::message::Mailbox = smtp.from.parse().map_err(|e| fail(&e))?;
    let to: lettre::message::Mailbox = to.parse().map_err(|e| fail(&e))?;
    let message = Message::builder()
        .from(from)
        .to(to)
        .subject(out.subject)
        // The same delivery always has the same Message-ID, so a mail
        // store (or the reader) can drop a repeat.
        .message_id(Some(message_id(out.key)))
        .header(lettre::message::header::ContentType::TEXT_PLAIN)
        .body(out.text.to_string())
        .map_err(|e| fail(&e))?;
    mailer.send(message).await.map_err(|e| fail(&e))?;
    Ok(())
}

/// The stable `Message-ID` of a delivery.
pub fn message_id(key: &str) -> String {
    format!("<{key}@vibedesk.monitor>")
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `key` (RFC 2104).
pub fn signature(key: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex(&hmac_sha256(key, body)))
}

const BLOCK: usize = 64;

/// HMAC-SHA256 over the `sha2` crate already in the tree.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        let digest = Sha256::digest(key);
        for (b, d) in block.iter_mut().zip(digest.iter()) {
            *b = *d;
        }
    } else {
        for (b, k) in block.iter_mut().zip(key) {
            *b = *k;
        }
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    let mut out = [0u8; 32];
    for (o, d) in out.iter_mut().zip(outer.iter()) {
        *o = *d;
    }
    out
}

pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test cases 1, 2 and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(&[0x0b; 20], b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn channels_parse_and_print_back() {
        for uri in [
            "file:/tmp/verdict.json",
            "webhook:https://hooks.example.com/x?y=1",
            "email:desk@example.com",
        ] {
            assert_eq!(uri.parse::<Channel>().unwrap().to_string(), uri);
        }
        for (bad, says) in [
            ("slack:#desk", "file:PATH, webhook:URL or email:ADDRESS"),
            ("no-scheme", "file:PATH"),
            ("file:", "empty"),
            ("webhook:ftp://x", "http(s)"),
            ("webhook:not a url", "http(s)"),
            ("email:nobody", "not an email address"),
        ] {
            let e = bad.parse::<Channel>().unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
