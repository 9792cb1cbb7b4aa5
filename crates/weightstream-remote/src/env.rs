//! The environment a store is configured from: a snapshot of the
//! process's variables when a checkpoint is opened, or a list a test
//! passes (so tests never set process-wide variables other tests read).

/// Variables, in the order given; the first of a name wins.
#[derive(Clone, Default)]
pub struct Env(Vec<(String, String)>);

impl Env {
    /// The process's environment (variables that are not UTF-8 are left
    /// out, as object_store's own `from_env` leaves them).
    pub fn process() -> Env {
        Env(std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect())
    }

    pub fn of(vars: &[(&str, &str)]) -> Env {
        Env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every variable whose name starts with `prefix`.
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.0.iter().filter(move |(k, _)| k.starts_with(prefix)).map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// By hand: values are credentials (keys, SAS tokens, connection strings).
impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|(k, _)| k)).finish()
    }
}
