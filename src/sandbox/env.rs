//! The child's environment: an allow-list, never a deny-list (docs §6.1).
//!
//! Everything the parent has is dropped unless it is named here. On top of
//! that, some names are refused even when a caller asks for them explicitly
//! ([`is_forbidden`]): LLM-provider and cloud credentials, and every variable
//! that makes a shell or interpreter load a file at start-up (`BASH_ENV`,
//! `ENV`, `NODE_OPTIONS`, `DOTENV_*`, ...). The engine never runs dotenv, and
//! nothing in the child's environment tells a child to (§12.13).
//!
//! Deliberate differences from the original's list, all towards less:
//! - market-data keys (`TUSHARE_TOKEN`, `FINNHUB_API_KEY`, ...) no longer
//!   pass by default: a command the model wrote could print them. A caller
//!   that needs one names it in [`EnvPlan::pass_through`];
//! - Windows-only names are gone (this runner is POSIX-only), and so are the
//!   `VIBE_TRADING_*` tunables, which have no meaning here;
//! - `XDG_CACHE_HOME` points into the throwaway HOME, not the real home's
//!   cache: with Landlock the child could not write there anyway, and a
//!   shared cache is a channel between runs.

use std::collections::BTreeMap;
use std::path::Path;

/// Passed through unchanged when the parent has them (docs §6.1, POSIX part).
const ALLOWED: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "LD_LIBRARY_PATH",
    "DYLD_LIBRARY_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
    "PYTHONHOME",
    "PYTHONPATH",
    "PYTHONNOUSERSITE",
    "REQUESTS_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    // Non-secret data-source tunables the original passes (§6.1).
    "CCXT_EXCHANGE",
    "CCXT_TIMEOUT_MS",
    "CCXT_FETCH_BUDGET_S",
    "OKX_TIMEOUT_S",
    "OKX_FETCH_BUDGET_S",
    "RSSHUB_BASE_URL",
    "RSSHUB_TIMEOUT_S",
    "RSSHUB_FETCH_BUDGET_S",
    "FUTU_HOST",
    "FUTU_PORT",
];

/// Any key with one of these prefixes passes (locale categories).
const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Never reach a child, whoever asks: model-provider keys (every preset the
/// engine knows and the common others), cloud credentials, and variables
/// that make a program load a file of settings at start-up.
const FORBIDDEN: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "MOONSHOT_API_KEY",
    "KIMI_API_KEY",
    "DASHSCOPE_API_KEY",
    "QWEN_API_KEY",
    "ZHIPUAI_API_KEY",
    "GLM_API_KEY",
    "VLLM_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "COHERE_API_KEY",
    "HF_TOKEN",
    "HUGGINGFACE_API_KEY",
    "HUGGING_FACE_HUB_TOKEN",
    "LANGCHAIN_PROVIDER",
    "LANGCHAIN_MODEL_NAME",
    "API_AUTH_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "FUTU_TRADE_PWD_MD5",
    "BINANCE_API_SECRET",
    "BINANCE_API_KEY",
    "ALPACA_API_KEY",
    "ALPACA_SECRET_KEY",
    // Start-up files: shells, interpreters and env-file loaders.
    "BASH_ENV",
    "ENV",
    "NODE_OPTIONS",
    "PYTHONSTARTUP",
    "PERL5OPT",
    "RUBYOPT",
    "UV_ENV_FILE",
    "PIPENV_DOTENV_LOCATION",
    "LD_PRELOAD",
    "LD_AUDIT",
    "PROMPT_COMMAND",
];

/// Prefixes refused whoever asks: cloud credentials, the engine's own
/// settings (its key lives in `VIBEDESK_API_KEY`), the original's, and
/// every dotenv knob.
const FORBIDDEN_PREFIXES: &[&str] = &[
    "AWS_",
    "AZURE_",
    "GOOGLE_APPLICATION_",
    "GCP_",
    "OPENAI_",
    "ANTHROPIC_",
    "LANGCHAIN_",
    "LANGSMITH_",
    "VIBEDESK_",
    "VIBE_TRADING_",
    "DOTENV_",
];

/// Names the runner itself sets for the child; these bypass the
/// `VIBEDESK_` prefix rule (they carry paths, never secrets).
const OWN_VARS: &[&str] = &["VIBEDESK_RUN_DIR", "VIBEDESK_WORKSPACE", "VIBEDESK_SANDBOX"];

/// Whether `name` is refused for any child, even when asked for explicitly.
pub fn is_forbidden(name: &str) -> bool {
    if OWN_VARS.contains(&name) {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    FORBIDDEN.contains(&upper.as_str()) || FORBIDDEN_PREFIXES.iter().any(|p| upper.starts_with(p))
}

/// Whether `name` passes from the parent without being asked for.
pub fn is_allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// What the runner knows about this child when it builds the environment.
#[derive(Clone, Debug)]
pub struct EnvPlan<'a> {
    /// The throwaway HOME.
    pub home: &'a Path,
    /// Private scratch: `TMPDIR`, `TMP`, `TEMP`.
    pub tmp: &'a Path,
    /// The child's cwd; prepended to `PYTHONPATH` (§6.1, RS-2).
    pub cwd: &'a Path,
    /// The user the child runs as, for `USER`/`LOGNAME`; `None` keeps the
    /// parent's values.
    pub user: Option<&'a str>,
    /// Parent variables the caller needs beyond the allow-list (for example a
    /// market-data key); forbidden names are still refused.
    pub pass_through: &'a [String],
    /// Set last, over everything else; forbidden names are refused.
    pub extra: &'a [(String, String)],
}

/// Builds the child's complete environment from `parent` (docs §6.1).
pub fn build_env(
    parent: &BTreeMap<String, String>,
    plan: &EnvPlan<'_>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = parent
        .iter()
        .filter(|(k, _)| !is_forbidden(k))
        .filter(|(k, _)| is_allowed(k) || plan.pass_through.iter().any(|p| p == *k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();

    let path_str = |p: &Path| p.to_string_lossy().into_owned();
    if !env.contains_key("PATH") {
        env.insert("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into());
    }
    if !env.contains_key("LANG") {
        env.insert("LANG".into(), "C.UTF-8".into());
    }
    let home = path_str(plan.home);
    env.insert("HOME".into(), home.clone());
    env.insert("XDG_CACHE_HOME".into(), format!("{home}/.cache"));
    env.insert("XDG_CONFIG_HOME".into(), format!("{home}/.config"));
    env.insert("XDG_DATA_HOME".into(), format!("{home}/.local/share"));
    let tmp = path_str(plan.tmp);
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.insert(k.into(), tmp.clone());
    }
    env.insert("SHELL".into(), "/bin/sh".into());
    let user = plan
        .user
        .map(str::to_string)
        .or_else(|| parent.get("USER").cloned())
        .or_else(|| parent.get("LOGNAME").cloned());
    if let Some(u) = user {
        env.insert("USER".into(), u.clone());
        env.insert("LOGNAME".into(), u);
    }
    // §6.1: UTF-8, unbuffered Python, so partial output survives a kill.
    env.insert("PYTHONUNBUFFERED".into(), "1".into());
    env.insert("PYTHONIOENCODING".into(), "utf-8".into());
    env.insert("PYTHONUTF8".into(), "1".into());
    // No __pycache__ litter in the run dir or the workspace.
    env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    // §12.13: tools that load `.env` by default are told not to.
    env.insert("PIPENV_DONT_LOAD_ENV".into(), "1".into());
    env.insert("UV_NO_ENV_FILE".into(), "1".into());
    // RS-2: the cwd first on PYTHONPATH, then whatever was there.
    let cwd = path_str(plan.cwd);
    let pythonpath = match env.get("PYTHONPATH").filter(|p| !p.is_empty()) {
        Some(existing) if existing.split(':').any(|p| p == cwd) => existing.clone(),
        Some(existing) => format!("{cwd}:{existing}"),
        None => cwd.clone(),
    };
    env.insert("PYTHONPATH".into(), pythonpath);
    env.insert("VIBEDESK_RUN_DIR".into(), cwd);
    env.insert("VIBEDESK_SANDBOX".into(), "1".into());
    for (k, v) in plan.extra {
        if is_forbidden(k) {
            tracing::warn!(variable = %k, "refused to pass a forbidden variable to a sandboxed child");
            continue;
        }
        env.insert(k.clone(), v.clone());
    }
    env
}

/// The parent's environment as a map. Variables whose name or value is not
/// UTF-8 are dropped: none of the allow-listed ones needs to be anything else.
pub fn parent_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> BTreeMap<String, String> {
        [
            ("PATH", "/opt/bin:/usr/bin"),
            ("HOME", "/home/alice"),
            ("USER", "alice"),
            ("LC_ALL", "en_US.UTF-8"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("no_proxy", "localhost"),
            ("SSL_CERT_FILE", "/etc/ssl/cert.pem"),
            ("CCXT_EXCHANGE", "okx"),
            ("PYTHONPATH", "/existing"),
            ("OPENAI_API_KEY", "sk-openai"),
            ("DEEPSEEK_API_KEY", "sk-deepseek"),
            ("OPENROUTER_API_KEY", "sk-or"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("VIBEDESK_API_KEY", "sk-vibedesk"),
            ("VIBEDESK_HOME", "/somewhere"),
            ("LANGCHAIN_PROVIDER", "openai"),
            ("API_AUTH_KEY", "k"),
            ("VIBE_TRADING_API_KEY", "k"),
            ("FUTU_TRADE_PWD_MD5", "md5"),
            ("BINANCE_API_SECRET", "b"),
            ("ALPACA_API_KEY", "a"),
            ("GITHUB_TOKEN", "ghp"),
            ("FINNHUB_API_KEY", "fh"),
            ("TUSHARE_TOKEN", "ts"),
            ("BASH_ENV", "/home/alice/.env"),
            ("ENV", "/home/alice/.env"),
            ("NODE_OPTIONS", "--require dotenv/config"),
            ("DOTENV_CONFIG_PATH", "/home/alice/.env"),
            ("LD_PRELOAD", "/evil.so"),
            ("SECRET_SAUCE", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn plan<'a>(pass: &'a [String], extra: &'a [(String, String)]) -> EnvPlan<'a> {
        EnvPlan {
            home: Path::new("/tmp/sb/home"),
            tmp: Path::new("/tmp/sb/tmp"),
            cwd: Path::new("/runs/r1"),
            user: Some("nobody"),
            pass_through: pass,
            extra,
        }
    }

    #[test]
    fn secrets_and_start_up_hooks_never_pass() {
        let env = build_env(&parent(), &plan(&[], &[]));
        for k in [
            "OPENAI_API_KEY",
            "DEEPSEEK_API_KEY",
            "OPENROUTER_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "VIBEDESK_API_KEY",
            "VIBEDESK_HOME",
            "LANGCHAIN_PROVIDER",
            "API_AUTH_KEY",
            "VIBE_TRADING_API_KEY",
            "FUTU_TRADE_PWD_MD5",
            "BINANCE_API_SECRET",
            "ALPACA_API_KEY",
            "GITHUB_TOKEN",
            "FINNHUB_API_KEY",
            "TUSHARE_TOKEN",
            "BASH_ENV",
            "ENV",
            "NODE_OPTIONS",
            "DOTENV_CONFIG_PATH",
            "LD_PRELOAD",
            "SECRET_SAUCE",
        ] {
            assert!(!env.contains_key(k), "{k} reached the child");
        }
        let values: Vec<&String> = env.values().collect();
        for secret in ["sk-openai", "sk-deepseek", "aws-secret", "sk-vibedesk"] {
            assert!(!values.iter().any(|v| v.contains(secret)));
        }
    }

    #[test]
    fn allow_listed_values_pass_and_the_sandbox_ones_are_set() {
        let env = build_env(&parent(), &plan(&[], &[]));
        assert_eq!(env["PATH"], "/opt/bin:/usr/bin");
        assert_eq!(env["LC_ALL"], "en_US.UTF-8");
        assert_eq!(env["HTTPS_PROXY"], "http://proxy:3128");
        assert_eq!(env["no_proxy"], "localhost");
        assert_eq!(env["SSL_CERT_FILE"], "/etc/ssl/cert.pem");
        assert_eq!(env["CCXT_EXCHANGE"], "okx");
        assert_eq!(env["HOME"], "/tmp/sb/home");
        assert_eq!(env["XDG_CACHE_HOME"], "/tmp/sb/home/.cache");
        assert_eq!(env["TMPDIR"], "/tmp/sb/tmp");
        assert_eq!(env["USER"], "nobody");
        assert_eq!(env["PYTHONUNBUFFERED"], "1");
        assert_eq!(env["PYTHONIOENCODING"], "utf-8");
        assert_eq!(env["PYTHONUTF8"], "1");
        assert_eq!(env["PIPENV_DONT_LOAD_ENV"], "1");
        // RS-2: cwd first, then the existing path.
        assert_eq!(env["PYTHONPATH"], "/runs/r1:/existing");
        assert_eq!(env["VIBEDESK_RUN_DIR"], "/runs/r1");
    }

    #[test]
    fn pass_through_is_explicit_and_cannot_unlock_forbidden_names() {
        let pass = vec!["FINNHUB_API_KEY".to_string(), "OPENAI_API_KEY".to_string()];
        let extra = vec![
            ("VIBEDESK_WORKSPACE".to_string(), "/ws".to_string()),
            ("DEEPSEEK_API_KEY".to_string(), "sneaky".to_string()),
            ("BASH_ENV".to_string(), "/x".to_string()),
        ];
        let env = build_env(&parent(), &plan(&pass, &extra));
        assert_eq!(env["FINNHUB_API_KEY"], "fh");
        assert!(!env.contains_key("OPENAI_API_KEY"));
        assert!(!env.contains_key("DEEPSEEK_API_KEY"));
        assert!(!env.contains_key("BASH_ENV"));
        assert_eq!(env["VIBEDESK_WORKSPACE"], "/ws");
    }

    #[test]
    fn defaults_fill_in_when_the_parent_has_nothing() {
        let env = build_env(&BTreeMap::new(), &plan(&[], &[]));
        assert_eq!(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
        assert_eq!(env["LANG"], "C.UTF-8");
        assert_eq!(env["PYTHONPATH"], "/runs/r1");
    }

    #[test]
    fn forbidden_matching_ignores_case() {
        assert!(is_forbidden("openai_api_key"));
        assert!(is_forbidden("aws_session_token"));
        assert!(!is_forbidden("VIBEDESK_WORKSPACE"));
        assert!(!is_forbidden("PATH"));
    }
}
