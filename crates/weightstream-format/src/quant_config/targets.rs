//! Which compressed-tensors config group governs a module, and whether the
//! config's `ignore` list leaves it unquantized: `match_targets` and
//! `is_match` of compressed-tensors (`utils/match.py`), module names only.
//!
//! compressed-tensors maps every target to the last group listing it, sorts
//! the targets by (`"re:" in target`, target), and takes the first that
//! matches the module's name (exact names, then `re:` patterns with
//! Python's `re.match`, anchored at the start only), else the first that
//! names one of its classes. The module's class is not in a checkpoint: a
//! target that is no `re:` and no module's name is taken as a class name,
//! and a weight's module as a `Linear` (what compressed-tensors quantizes);
//! where other class names compete, every group they pick stays a
//! candidate.

use std::collections::HashSet;

/// A target: a module name (or class name), or a compiled `re:` pattern.
enum Matcher {
    Name(String),
    Pattern(regex::Regex),
}

impl Matcher {
    /// A `re:` pattern Rust's regex cannot compile (a look-ahead, a
    /// back-reference) is refused, naming it: taking it to match nothing or
    /// everything would pick another group than compressed-tensors does.
    fn new(target: &str, at: &str) -> Result<Matcher, String> {
        match target.strip_prefix("re:") {
            None => Ok(Matcher::Name(target.to_string())),
            Some(p) => regex::Regex::new(&format!("^(?:{p})")).map(Matcher::Pattern).map_err(|e| {
                let why = e.to_string().lines().last().unwrap_or_default().trim().to_string();
                format!(
                    "{at} pattern '{target}' is not one weightstream's regex engine reads ({why}), so which modules it matches is unknown"
                )
            }),
        }
    }

    fn matches_name(&self, module: &str) -> bool {
        match self {
            Matcher::Name(n) => n == module,
            Matcher::Pattern(re) => re.is_match(module),
        }
    }
}

/// Every group's targets, in compressed-tensors' sorted order.
pub(super) struct Targets {
    /// (target, its matcher, the group it maps to: the last listing it).
    sorted: Vec<(String, Matcher, usize)>,
}

impl Targets {
    /// `groups[i]`: group `i`'s name and targets.
    pub(super) fn new(groups: &[(String, Vec<String>)]) -> Result<Targets, String> {
        let mut sorted: Vec<(String, Matcher, usize)> = Vec::new();
        for (gi, (name, targets)) in groups.iter().enumerate() {
            for t in targets {
                let at = format!("config_groups.{name}.targets");
                match sorted.iter_mut().find(|(s, ..)| s == t) {
                    Some(entry) => entry.2 = gi,
                    None => sorted.push((t.clone(), Matcher::new(t, &at)?, gi)),
                }
            }
        }
        sorted.sort_by(|a, b| (a.0.contains("re:"), &a.0).cmp(&(b.0.contains("re:"), &b.0)));
        Ok(Targets { sorted })
    }

    /// The groups that may govern `module` (`modules`: every weight's
    /// module in the checkpoint): one, by name or pattern; by class, the
    /// `Linear` group if one is, else every class target's group.
    pub(super) fn pick(&self, module: &str, modules: &HashSet<&str>) -> Vec<usize> {
        if let Some((.., g)) = self.sorted.iter().find(|(_, m, _)| m.matches_name(module)) {
            return vec![*g];
        }
        let classes: Vec<&(String, Matcher, usize)> =
            self.sorted.iter().filter(|(t, m, _)| matches!(m, Matcher::Name(_)) && !modules.contains(t.as_str())).collect();
        if let Some((.., g)) = classes.iter().find(|(t, ..)| t == "Linear") {
            return vec![*g];
        }
        classes.iter().map(|(.., g)| *g).collect()
    }
}

/// The `ignore` list: modules compressed-tensors leaves unquantized.
pub(super) struct Ignore(Vec<(String, Matcher)>);

impl Ignore {
    pub(super) fn new(entries: &[String]) -> Result<Ignore, String> {
        entries.iter().map(|e| Ok((e.clone(), Matcher::new(e, "quantization_config.ignore")?))).collect::<Result<_, _>>().map(Ignore)
    }

    /// The entry that leaves `module` unquantized, by name or pattern
    /// (class names in `ignore` are not matched: no class is known).
    pub(super) fn entry_for(&self, module: &str) -> Option<&str> {
        self.0.iter().find(|(_, m)| m.matches_name(module)).map(|(e, _)| e.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(groups: &[(&str, &[&str])]) -> Targets {
        let g: Vec<(String, Vec<String>)> =
            groups.iter().map(|(n, ts)| (n.to_string(), ts.iter().map(|t| t.to_string()).collect())).collect();
        Targets::new(&g).unwrap()
    }

    #[test]
    fn name_then_sorted_pattern_then_class() {
        let t = targets(&[("a", &["Linear"]), ("b", &["re:.*mlp.*", "re:.*down.*"]), ("c", &["m.mlp.up"]), ("d", &["re:.*\\.mlp\\..*"])]);
        let modules: HashSet<&str> = ["m.mlp.up", "m.mlp.down", "m.attn.q"].into();
        assert_eq!(t.pick("m.mlp.up", &modules), [2]);
        // 're:.*\.mlp\..*' sorts before 're:.*down.*' and 're:.*mlp.*'.
        assert_eq!(t.pick("m.mlp.down", &modules), [3]);
        assert_eq!(t.pick("m.attn.q", &modules), [0]);
        // A target listed by two groups maps to the last.
        let t = targets(&[("a", &["Linear"]), ("b", &["Linear"])]);
        assert_eq!(t.pick("x", &HashSet::new()), [1]);
        let t = targets(&[("a", &["Embedding"]), ("b", &["MoE"])]);
        assert_eq!(t.pick("x", &HashSet::new()), [0, 1]);
    }

    #[test]
    fn patterns_the_engine_cannot_read_are_refused() {
        let g = vec![("g".to_string(), vec!["re:(?!lm_head).*".to_string()])];
        let e = Targets::new(&g).err().expect("a look-ahead is refused");
        assert!(e.contains("config_groups.g.targets") && e.contains("(?!lm_head)"), "{e}");
        let e = Ignore::new(&["re:(?<=x)y".to_string()]).err().expect("a look-behind is refused");
        assert!(e.contains("quantization_config.ignore") && e.contains("(?<=x)y"), "{e}");
        let i = Ignore::new(&["lm_head".to_string(), "re:.*gate$".to_string()]).unwrap();
        assert_eq!(i.entry_for("lm_head"), Some("lm_head"));
        assert_eq!(i.entry_for("m.mlp.gate"), Some("re:.*gate$"));
        assert_eq!(i.entry_for("m.mlp.gate_proj"), None);
    }
}
