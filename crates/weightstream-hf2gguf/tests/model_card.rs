//! README.md model cards that cost the machine (issue 55): an alias bomb
//! of big scalars is refused naming README.md, within a small heap; a card
//! of 100,000 datasets converts in linear time. Heap use is counted by a
//! counting allocator, which also refuses to let the heap pass 1 GiB: a
//! regression aborts this test binary instead of the machine.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::llama;
use weightstream_hf2gguf::{build, HfError, HfInput, Kind, Metadata, Value};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Past this the allocator fails (and Rust aborts the process).
const CAP: usize = 1 << 30;

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if CURRENT.load(Ordering::Relaxed) + l.size() > CAP {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, forwarded unchanged.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: p came from System.alloc with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The tests share the counters: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The tiny Llama with README.md `readme`: its result and the peak heap
/// above the start while it was built.
fn with_readme(readme: &str) -> (Result<Metadata, HfError>, usize) {
    let c = llama();
    let config = serde_json::to_vec(&c.config).unwrap();
    let tok = serde_json::to_vec(&c.tokenizer).unwrap();
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let input = HfInput {
        dir_name: "tiny",
        config: &config,
        tokenizer_json: Some(&tok),
        readme: Some(readme.as_bytes()),
        tensors: &c.tensors,
        ..Default::default()
    };
    let r = build(&input);
    (r, PEAK.load(Ordering::Relaxed) - base)
}

#[test]
fn an_alias_bomb_is_refused_naming_the_readme_within_a_small_heap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // An anchored 256 KiB scalar aliased 40,000 times: 10 GiB as copies
    // (the node count, 40,001, was far under its bound).
    let mut card = format!("---\nlicense: mit\nbig: &big {}\ndatasets:\n", "x".repeat(256 << 10));
    card += &"- *big\n".repeat(40_000);
    card += "---\n# Model\n";
    let (r, peak) = with_readme(&card);
    let e = r.expect_err("an alias bomb is refused");
    assert_eq!((e.kind, e.file.as_str(), e.field.as_str()), (Kind::Format, "README.md", "(front matter)"), "{e}");
    assert!(e.why.contains("aliases expanded"), "{e}");
    // The card is 0.5 MB; a few copies of it, not 10 GiB.
    assert!(peak < 8 * card.len() + (8 << 20), "peak heap {peak} for a {}-byte card", card.len());
    // Aliases nested in anchors (each anchor's copy counted): refused too.
    let mut nested = format!("---\na0: &a0 {}\n", "y".repeat(64 << 10));
    for i in 1..64 {
        nested += &format!("a{i}: &a{i} [*a{}]\n", i - 1);
    }
    let (r, peak) = with_readme(&(nested.clone() + "---\n"));
    assert_eq!(r.expect_err("nested anchors are refused").field, "(front matter)");
    assert!(peak < 8 * nested.len() + (8 << 20), "peak heap {peak} for a {}-byte card", nested.len());
    // A card that aliases a little still converts.
    let (r, _) = with_readme("---\nbase: &b org/model-v1\nbase_model: [*b]\ndatasets: [*b, *b]\n---\n");
    let m = r.unwrap();
    assert_eq!(m.get("general.dataset.count"), Some(&Value::U32(2)));
    assert_eq!(m.get("general.base_model.0.name"), Some(&Value::Str("Model v1".into())));
}

#[test]
fn a_hundred_thousand_datasets_convert_in_linear_time() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 400,000 general.dataset.* keys. Each key set was a scan of every key
    // set before it: quadratic, 322 s. With a map: a fraction of a second;
    // a regression does not finish (no timing is asserted).
    let n = 100_000;
    let mut card = String::from("---\nlicense: mit\ndatasets:\n");
    for i in 0..n {
        card += &format!("- org{i}/set-{i}-v2\n");
    }
    card += "---\n";
    let (r, peak) = with_readme(&card);
    let m = r.unwrap();
    assert_eq!(m.get("general.dataset.count"), Some(&Value::U32(n)));
    let last = n - 1;
    assert_eq!(m.get(&format!("general.dataset.{last}.organization")), Some(&Value::Str(format!("Org{last}"))));
    let url = format!("https://huggingface.co/org{last}/set-{last}-v2");
    assert_eq!(m.get(&format!("general.dataset.{last}.repo_url")), Some(&Value::Str(url)));
    assert_eq!(m.kv.iter().filter(|(k, _)| k.starts_with("general.dataset.")).count(), 1 + 4 * n as usize);
    // Linear memory too: some hundred bytes per dataset.
    assert!(peak < 400 * card.len(), "peak heap {peak} for a {}-byte card", card.len());
}
