//! A GGUF's expert counts against its tensors, checked when the C API
//! opens it: llama.cpp (what the C API serves, through the adapter)
//! asserts `<arch>.expert_count <= LLAMA_MAX_EXPERTS` (512),
//! `expert_used_count <= expert_count`, and a used count that is nonzero
//! exactly when there are experts, and aborts the host process when one
//! fails; and it sizes the expert tensors from the count. A GGUF whose
//! counts its tensors do not bear out (a dense model declaring 2^32 - 1
//! experts, issue 55) is refused here instead, naming the key and tensor.

use weightstream::format::gguf::MetadataValue;
use weightstream::format::{Catalog, Format};

use crate::abi::{Failure, WsStatus};

/// llama.cpp's LLAMA_MAX_EXPERTS.
pub(crate) const MAX_EXPERTS: u64 = 512;

/// The value of integer key `key`, if present.
fn count(cat: &Catalog, key: &str) -> Result<Option<u64>, String> {
    let Some(v) = cat.metadata.gguf_value(key) else { return Ok(None) };
    let n = match *v {
        MetadataValue::U8(x) => Some(x as u64),
        MetadataValue::U16(x) => Some(x as u64),
        MetadataValue::U32(x) => Some(x as u64),
        MetadataValue::U64(x) => Some(x),
        MetadataValue::I8(x) => u64::try_from(x).ok(),
        MetadataValue::I16(x) => u64::try_from(x).ok(),
        MetadataValue::I32(x) => u64::try_from(x).ok(),
        MetadataValue::I64(x) => u64::try_from(x).ok(),
        _ => None,
    };
    // The type only: the value may be an array of any length.
    n.map(Some).ok_or_else(|| format!("{key} is a {} that is not a count (a non-negative integer)", v.type_name()))
}

/// Which expert a tensor holds: `Stacked` for a stack of every expert
/// (`blk.N.ffn_up_exps.weight`, the router `blk.N.ffn_gate_inp.weight`:
/// outermost dimension one per expert), `One(e)` for expert `e` of the
/// older per-expert layout (`blk.N.ffn_up.E.weight`).
enum Experts {
    Stacked,
    One(u64),
}

fn experts_of(name: &str) -> Option<Experts> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.iter().any(|p| p.ends_with("_exps") || *p == "ffn_gate_inp") {
        return Some(Experts::Stacked);
    }
    match parts[..] {
        ["blk", _, "ffn_gate" | "ffn_up" | "ffn_down", e, _] => e.parse().ok().map(Experts::One),
        _ => None,
    }
}

fn refuse(cat: &Catalog, why: String) -> Failure {
    Failure::new(WsStatus::Format, format!("{}: {why}", cat.root.display()))
}

/// Refuses a GGUF whose expert counts llama.cpp would abort on, or that
/// its expert tensors disagree with. Other formats: nothing to check.
pub(crate) fn check(cat: &Catalog) -> Result<(), Failure> {
    if cat.format != Format::Gguf {
        return Ok(());
    }
    let Some(MetadataValue::String(arch)) = cat.metadata.gguf_value("general.architecture") else { return Ok(()) };
    let (count_key, used_key) = (format!("{arch}.expert_count"), format!("{arch}.expert_used_count"));
    let n = count(cat, &count_key).map_err(|why| refuse(cat, why))?;
    let used = count(cat, &used_key).map_err(|why| refuse(cat, why))?.unwrap_or(0);
    let declared = n.map_or_else(|| format!("{count_key} is absent"), |n| format!("{count_key} is {n}"));
    let n = n.unwrap_or(0);
    if n > MAX_EXPERTS {
        return Err(refuse(cat, format!("{declared}: llama.cpp takes at most {MAX_EXPERTS} experts")));
    }
    if used > n || (n > 0 && used == 0) {
        let want = if n > 0 { format!("1..={n}") } else { "0 (absent)".into() };
        return Err(refuse(cat, format!("{used_key} is {used} and {declared}: it must be {want}")));
    }
    let mut has_experts = false;
    for t in &cat.tensors {
        let holds = match experts_of(&t.name) {
            None => continue,
            Some(Experts::Stacked) => t.shape.first().is_some_and(|&e| e == n),
            Some(Experts::One(e)) => e < n,
        };
        if !holds {
            return Err(refuse(cat, format!("tensor '{}' (shape {:?}) does not hold the experts {declared} declares", t.name, t.shape)));
        }
        has_experts = true;
    }
    if n > 0 && !has_experts {
        return Err(refuse(cat, format!("{declared}, but no tensor holds experts (blk.N.ffn_*_exps)")));
    }
    Ok(())
}
