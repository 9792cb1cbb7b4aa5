//! The AWS shared files: `~/.aws/credentials` and `~/.aws/config` (or
//! `AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`), profile
//! `AWS_PROFILE` or `default`. Used when the environment has no keys
//! (`object_store` reads the environment, web identity and instance
//! metadata, not these files).

use std::collections::HashMap;
use std::path::PathBuf;

use object_store::aws::AmazonS3Builder;

#[derive(Debug, Default, PartialEq)]
pub struct Profile {
    pub values: HashMap<String, String>,
}

impl Profile {
    pub fn apply(&self, mut b: AmazonS3Builder) -> AmazonS3Builder {
        let v = |k: &str| self.values.get(k).cloned();
        if let (Some(id), Some(secret)) = (v("aws_access_key_id"), v("aws_secret_access_key")) {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
            if let Some(t) = v("aws_session_token") {
                b = b.with_token(t);
            }
        }
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            if let Some(r) = v("region") {
                b = b.with_region(r);
            }
        }
        b
    }
}

/// The profile's keys from both files (credentials win), if any file has it.
pub fn from_files() -> Option<Profile> {
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let name = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let creds = std::env::var_os("AWS_SHARED_CREDENTIALS_FILE").map(PathBuf::from).unwrap_or_else(|| home.join(".aws/credentials"));
    let config = std::env::var_os("AWS_CONFIG_FILE").map(PathBuf::from).unwrap_or_else(|| home.join(".aws/config"));
    let mut p = Profile::default();
    // In config, profiles other than default are `[profile NAME]`.
    let config_section = if name == "default" { name.clone() } else { format!("profile {name}") };
    for (file, section) in [(config, config_section), (creds, name)] {
        if let Ok(text) = std::fs::read_to_string(&file) {
            p.values.extend(section_of(&text, &section));
        }
    }
    (!p.values.is_empty()).then_some(p)
}

/// `key = value` pairs of `[section]` in INI text.
pub fn section_of(text: &str, section: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(h) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = h.trim() == section;
        } else if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_section() {
        let t = "[default]\naws_access_key_id = A\n[profile x]\nregion=eu-west-1\n# c\naws_access_key_id=B\n";
        assert_eq!(section_of(t, "default").get("aws_access_key_id").map(String::as_str), Some("A"));
        let x = section_of(t, "profile x");
        assert_eq!((x["region"].as_str(), x["aws_access_key_id"].as_str()), ("eu-west-1", "B"));
    }
}
