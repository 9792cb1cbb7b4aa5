//! Azure Blob Storage: `az://container/key` (and `abfs(s)://`,
//! `https://ACCOUNT.blob.core.windows.net/container/key`) through
//! object_store's Azure client, with Azure's standard credentials:
//!
//! - a SAS token in the URL (`https://...?sv=...&sig=...`);
//! - `AZURE_STORAGE_CONNECTION_STRING` (`AccountName=...;AccountKey=...`,
//!   `SharedAccessSignature=...`, `BlobEndpoint=...`,
//!   `UseDevelopmentStorage=true`), which object_store does not read;
//! - `AZURE_STORAGE_ACCOUNT` and `AZURE_STORAGE_KEY` (the Azure CLI's
//!   names) or object_store's `AZURE_STORAGE_ACCOUNT_NAME`/`_KEY`;
//!   `AZURE_STORAGE_SAS_TOKEN`; a service principal, workload identity,
//!   the Azure CLI or managed identity (object_store's `AZURE_*` chain).
//!
//! Emulators: `AZURE_STORAGE_USE_EMULATOR=true` with
//! `AZURITE_BLOB_STORAGE_URL` (Azurite's well-known account and key unless
//! others are given), or any `BlobEndpoint`/`AZURE_STORAGE_ENDPOINT`.
//!
//! Every GET is pinned with `If-Match` to the ETag seen at open (Azurite
//! and Azure answer 412 once the blob is replaced), or to the version id
//! where the account keeps versions; see source.rs.

use std::sync::Arc;

use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};

use crate::client::{build_error, retry, NoRedirects};
use crate::env::Env;
use crate::error::RemoteError;
use crate::options::RemoteOptions;
use crate::secret;
use crate::url::RemoteUrl;

pub fn build(url: &RemoteUrl, opts: &RemoteOptions, env: &Env) -> Result<Arc<object_store::azure::MicrosoftAzure>, RemoteError> {
    let mut b = MicrosoftAzureBuilder::new();
    // A connection string first: the explicit variables below override it.
    if let Some(cs) = env.get("AZURE_STORAGE_CONNECTION_STRING") {
        secret::register(cs);
        b = apply_connection_string(b, cs);
    }
    // The Azure CLI's and SDKs' names, which object_store does not read.
    if let Some(a) = env.get("AZURE_STORAGE_ACCOUNT") {
        b = b.with_account(a);
    }
    if let Some(k) = env.get("AZURE_STORAGE_KEY") {
        b = b.with_access_key(k);
    }
    // What object_store's `from_env` does, from `env`.
    for (k, v) in env.with_prefix("AZURE_") {
        if let Ok(key) = k.to_ascii_lowercase().parse::<AzureConfigKey>() {
            b = b.with_config(key, v);
        }
    }
    if let Some(e) = env.get("MSI_ENDPOINT").or_else(|| env.get("IDENTITY_ENDPOINT")) {
        b = b.with_msi_endpoint(e);
    }
    for key in [AzureConfigKey::AccessKey, AzureConfigKey::SasKey, AzureConfigKey::ClientSecret, AzureConfigKey::Token] {
        if let Some(v) = b.get_config_value(&key) {
            secret::register_query(&v);
        }
    }
    if let Some(account) = &url.account {
        b = b.with_account(account);
    }
    // A SAS token in the URL is this URL's credential: it wins over the
    // environment's (as it does for azcopy).
    if let Some(sas) = &url.query {
        secret::register_query(sas);
        let pairs = object_store::azure::split_sas(sas).map_err(|e| build_error(url, &e))?;
        b = b.with_sas_authorization(pairs).with_credential_type("sas_token");
    }
    let emulator = b.get_config_value(&AzureConfigKey::UseEmulator).as_deref() == Some("true");
    if !emulator && b.get_config_value(&AzureConfigKey::AccountName).is_none() {
        // object_store would say only "Account must be specified".
        return Err(RemoteError::new(
            crate::RemoteErrorKind::BadUrl,
            url.object(),
            "no storage account: name it in the URL (abfss://container@ACCOUNT.dfs.core.windows.net/..., \
             https://ACCOUNT.blob.core.windows.net/container/...) or set AZURE_STORAGE_ACCOUNT or AZURE_STORAGE_CONNECTION_STRING",
        ));
    }
    let endpoint = if emulator {
        env.get("AZURITE_BLOB_STORAGE_URL").map(str::to_string).or_else(|| Some("http://127.0.0.1:10000".into()))
    } else {
        b.get_config_value(&AzureConfigKey::Endpoint)
    };
    let allow_http = endpoint.is_some_and(|e| e.starts_with("http://"));
    let b = b.with_container_name(&url.bucket).with_retry(retry(opts)).with_http_connector(NoRedirects::new(allow_http, opts));
    Ok(Arc::new(b.build().map_err(|e| build_error(url, &e))?))
}

/// The parts of a connection string object_store has settings for.
fn apply_connection_string(mut b: MicrosoftAzureBuilder, cs: &str) -> MicrosoftAzureBuilder {
    let parts = parse_connection_string(cs);
    let get = |name: &str| parts.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    if get("UseDevelopmentStorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        b = b.with_use_emulator(true);
    }
    if let Some(a) = get("AccountName") {
        b = b.with_account(a);
    }
    if let Some(k) = get("AccountKey") {
        secret::register(k);
        b = b.with_access_key(k);
    }
    if let Some(sas) = get("SharedAccessSignature") {
        secret::register_query(sas);
        b = b.with_config(AzureConfigKey::SasKey, sas);
    }
    let endpoint = get("BlobEndpoint").map(|e| e.trim_end_matches('/').to_string()).or_else(|| {
        // `DefaultEndpointsProtocol` and `EndpointSuffix` (a sovereign
        // cloud) make the account's endpoint.
        let (account, suffix) = (get("AccountName")?, get("EndpointSuffix")?);
        Some(format!("{}://{account}.blob.{suffix}", get("DefaultEndpointsProtocol").unwrap_or("https")))
    });
    if let Some(e) = endpoint {
        b = b.with_endpoint(e);
    }
    b
}

/// `Key=Value;Key=Value` pairs (a value may hold `=`, as a base64 key and a
/// SAS token do).
pub fn parse_connection_string(cs: &str) -> Vec<(String, String)> {
    cs.split(';')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_strings_split_at_the_first_equals() {
        let p = parse_connection_string(
            "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5==;BlobEndpoint=http://127.0.0.1:1/dev;SharedAccessSignature=sv=1&sig=x%3D;",
        );
        let get = |k: &str| p.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("AccountKey"), Some("a2V5=="));
        assert_eq!(get("BlobEndpoint"), Some("http://127.0.0.1:1/dev"));
        assert_eq!(get("SharedAccessSignature"), Some("sv=1&sig=x%3D"));
    }
}
