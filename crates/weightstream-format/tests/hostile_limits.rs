//! A hostile header cannot make the readers allocate more than a small
//! multiple of the file's size, or take time beyond linear in it. Peak heap
//! use is measured with a counting allocator while each adversarial file is
//! parsed; time as a throughput floor far below what linear parsing gives.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use weightstream_format::{gguf, safetensors, MemorySource};

struct Counting;
static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
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

/// Tests share the counters: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Parse `bytes` with `f`; return (peak heap above the start, seconds).
fn measure(bytes: Vec<u8>, f: impl Fn(&MemorySource)) -> (usize, f64, usize) {
    let len = bytes.len();
    let src = MemorySource::new("hostile", bytes);
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    f(&src);
    let secs = t.elapsed().as_secs_f64();
    (PEAK.load(Ordering::Relaxed) - base, secs, len)
}

fn check(what: &str, (peak, secs, len): (usize, f64, usize)) {
    eprintln!("{what}: {len} bytes, peak heap {peak} ({:.2}x), {secs:.3} s", peak as f64 / len as f64);
    assert!(peak <= 4 * len + (1 << 20), "{what}: peak heap {peak} for a {len}-byte file");
    // Linear parsing runs at hundreds of MB/s; 10 MB/s is a floor that only
    // super-linear work (or a pathological machine) misses.
    assert!(secs < 0.1 + len as f64 / 10e6, "{what}: {secs:.3} s for {len} bytes");
}

fn gstr(s: &[u8]) -> Vec<u8> {
    let mut v = (s.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(s);
    v
}

/// A GGUF file, padded to the default alignment so that zero-size tensors at
/// data offset 0 lie inside it.
fn gguf_file(kv: Vec<u8>, kv_count: u64, tensors: Vec<u8>, tensor_count: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(tensor_count.to_le_bytes());
    b.extend(kv_count.to_le_bytes());
    b.extend(kv);
    b.extend(tensors);
    b.resize(b.len().next_multiple_of(32), 0);
    b
}

#[test]
fn millions_of_empty_strings() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n: u64 = 4 << 20;
    let mut kv = gstr(b"tokenizer.ggml.tokens");
    kv.extend(9u32.to_le_bytes()); // array
    kv.extend(8u32.to_le_bytes()); // of strings
    kv.extend(n.to_le_bytes());
    kv.extend(std::iter::repeat_n(0u8, 8 * n as usize)); // each: length 0
    let m = measure(gguf_file(kv, 1, vec![], 0), |s| {
        gguf::read_header(s).unwrap();
    });
    check("4M empty strings", m);
}

#[test]
fn a_million_metadata_pairs() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = 1u64 << 20;
    let mut kv = Vec::new();
    for i in 0..n {
        kv.extend(gstr(format!("k{i}").as_bytes()));
        kv.extend(0u32.to_le_bytes()); // u8
        kv.push(1);
    }
    let m = measure(gguf_file(kv, n, vec![], 0), |s| {
        gguf::read_header(s).unwrap();
    });
    check("1M metadata pairs", m);
}

#[test]
fn a_million_tensor_infos() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = 1u64 << 20;
    let mut t = Vec::new();
    for i in 0..n {
        t.extend(gstr(format!("t{i}").as_bytes()));
        t.extend(1u32.to_le_bytes()); // 1 dimension
        t.extend(0u64.to_le_bytes()); // of size 0
        t.extend(0u32.to_le_bytes()); // F32
        t.extend(0u64.to_le_bytes()); // offset 0
    }
    let m = measure(gguf_file(vec![], 0, t, n), |s| {
        gguf::read_header(s).unwrap();
    });
    check("1M tensor infos", m);
}

#[test]
fn counts_claiming_more_than_the_file_holds_allocate_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut kv = gstr(b"a");
    kv.extend(9u32.to_le_bytes());
    kv.extend(10u32.to_le_bytes()); // u64 elements
    kv.extend((1u64 << 27).to_le_bytes()); // a billion bytes claimed
    let m = measure(gguf_file(kv, 1, vec![], 1 << 23), |s| {
        assert!(gguf::read_header(s).is_err());
    });
    assert!(m.0 < 1 << 20, "{} bytes allocated for a header that claims 1 GB", m.0);
}

#[test]
fn a_safetensors_header_of_a_million_entries() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = 1usize << 20;
    let mut h = String::from("{");
    for i in 0..n {
        if i > 0 {
            h.push(',');
        }
        h.push_str(&format!("\"t{i}\":{{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}"));
    }
    h.push('}');
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend(h.into_bytes());
    let m = measure(b, |s| {
        safetensors::read_header(s).unwrap();
    });
    check("1M safetensors entries", m);
}

/// Entries whose shapes have the most dimensions allowed: the most memory
/// per header byte a safetensors header can ask for.
fn sixteen_dim_header(n: usize) -> Vec<u8> {
    let mut h = String::from("{");
    for i in 0..n {
        if i > 0 {
            h.push(',');
        }
        h.push_str(&format!("\"{i}\":{{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[{i},{}]}}", i + 1));
    }
    h.push('}');
    let mut b = (h.len() as u64).to_le_bytes().to_vec();
    b.extend(h.into_bytes());
    b.resize(b.len() + n, 7);
    b
}

#[test]
fn sixteen_dimensional_shapes() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let m = measure(sixteen_dim_header(1 << 18), |s| {
        safetensors::read_header(s).unwrap();
    });
    check("256K 16-dim entries", m);
}

#[test]
fn whole_catalogs_stay_small_multiples() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let bytes = sixteen_dim_header(1 << 18);
    let len = bytes.len();
    let src: weightstream_format::SharedSource = std::sync::Arc::new(MemorySource::new("hostile", bytes));
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t = Instant::now();
    let cat = weightstream_format::safetensors_catalog(std::path::Path::new("hostile"), vec![src], None).unwrap();
    let m = (PEAK.load(Ordering::Relaxed) - base, t.elapsed().as_secs_f64(), len);
    assert_eq!(cat.tensors.len(), 1 << 18);
    check("catalog of 256K 16-dim entries", m);
}
