//! Google Cloud Storage: `gs://bucket/key` through object_store's GCS
//! client (the XML API), with Google's standard credential chain:
//!
//! - `GOOGLE_SERVICE_ACCOUNT` (a service-account JSON file) or
//!   `GOOGLE_SERVICE_ACCOUNT_KEY` (its contents);
//! - `GOOGLE_APPLICATION_CREDENTIALS` (application default credentials: a
//!   service account or `gcloud auth application-default login`'s file),
//!   else gcloud's well-known file;
//! - else the metadata server (on GCE, GKE, Cloud Run; `GCE_METADATA_HOST`
//!   moves it);
//! - `GOOGLE_SKIP_SIGNATURE=true`: anonymous (public buckets).
//!
//! Emulators: `GOOGLE_BASE_URL` (object_store's name) or
//! `STORAGE_EMULATOR_HOST` (the name Google's own client libraries and
//! fake-gcs-server document), the latter also meaning "no credentials", as
//! it does for Google's clients.
//!
//! Every GET is pinned to the object's generation (`?generation=N`, which
//! GCS and fake-gcs-server both honour; fake-gcs-server ignores `If-Match`
//! and `ifGenerationMatch`), see source.rs.

use std::sync::Arc;

use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

use crate::client::{build_error, retry, NoRedirects};
use crate::env::Env;
use crate::error::RemoteError;
use crate::options::RemoteOptions;
use crate::url::RemoteUrl;

/// The variables that hold credentials themselves (not paths to them).
const SECRET_VARS: [&str; 2] = ["GOOGLE_SERVICE_ACCOUNT_KEY", "GOOGLE_BEARER_TOKEN"];

pub fn build(url: &RemoteUrl, opts: &RemoteOptions, env: &Env) -> Result<Arc<object_store::gcp::GoogleCloudStorage>, RemoteError> {
    register_secrets(env);
    let mut b = GoogleCloudStorageBuilder::new();
    // What object_store's `from_env` does, from `env`.
    if let Some(path) = env.get("SERVICE_ACCOUNT") {
        b = b.with_service_account_path(path);
    }
    for (k, v) in env.with_prefix("GOOGLE_") {
        if let Ok(key) = k.to_ascii_lowercase().parse::<GoogleConfigKey>() {
            b = b.with_config(key, v);
        }
    }
    if b.get_config_value(&GoogleConfigKey::BaseUrl).is_none() {
        if let Some(host) = env.get("STORAGE_EMULATOR_HOST").filter(|h| !h.is_empty()) {
            let base = if host.contains("://") { host.to_string() } else { format!("http://{host}") };
            b = b.with_base_url(base.trim_end_matches('/'));
            let has_credentials = [GoogleConfigKey::ServiceAccount, GoogleConfigKey::ServiceAccountKey, GoogleConfigKey::BearerToken]
                .iter()
                .any(|k| b.get_config_value(k).is_some());
            if !has_credentials {
                b = b.with_skip_signature(true);
            }
        }
    }
    let allow_http = b.get_config_value(&GoogleConfigKey::BaseUrl).is_some_and(|u| u.starts_with("http://"));
    let b = b.with_bucket_name(&url.bucket).with_retry(retry(opts)).with_http_connector(NoRedirects::new(allow_http, opts));
    Ok(Arc::new(b.build().map_err(|e| build_error(url, &e))?))
}

/// Every credential the environment holds, for secret.rs: the key JSON
/// whole, its private key, and a bearer token; a key file's private key too.
fn register_secrets(env: &Env) {
    let register_json = |text: &str| {
        crate::secret::register(text);
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(text) {
            for field in ["private_key", "private_key_id", "client_secret", "refresh_token"] {
                if let Some(v) = json.get(field).and_then(|v| v.as_str()) {
                    crate::secret::register(v);
                    // A PEM's body lines, which a message may quote alone.
                    v.lines().filter(|l| !l.starts_with("-----")).for_each(crate::secret::register);
                }
            }
        }
    };
    for var in SECRET_VARS {
        if let Some(v) = env.get(var) {
            register_json(v);
        }
    }
    for var in ["GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH", "SERVICE_ACCOUNT", "GOOGLE_APPLICATION_CREDENTIALS"] {
        if let Some(text) = env.get(var).and_then(|p| std::fs::read_to_string(p).ok()) {
            register_json(&text);
        }
    }
}
