//! Faults on the load path: a file that shrinks during a load, read errors
//! injected mid-tensor, cancellation, and concurrent loads. Each failure is
//! an error naming file, tensor and offset; nothing crashes; concurrent
//! results equal serial ones bit for bit.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use weightstream::format::{open_with, FileSource, SharedSource};
use weightstream::{convert_catalog, Control, ConvertOptions, CpuExecutor, Error, HostTensor, Plan, PlanOptions, Staging};
use weightstream_io::testing::FailingSource;

/// A safetensors file of F32 and F16 tensors with known contents.
fn write_checkpoint(dir: &Path, name: &str, tensors: usize, elems: usize) -> PathBuf {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for t in 0..tensors {
        let (dtype, size) = if t % 2 == 0 { ("F32", 4) } else { ("F16", 2) };
        let start = data.len();
        for i in 0..elems {
            let v = (t * 1000 + i) as f32 * 0.001;
            if size == 4 {
                data.extend_from_slice(&v.to_le_bytes());
            } else {
                data.extend_from_slice(&(((t * 7 + i) % 0x7C00) as u16).to_le_bytes());
            }
        }
        header.insert(format!("t{t}"), serde_json::json!({"dtype": dtype, "shape": [elems], "data_offsets": [start, data.len()]}));
    }
    let mut h = serde_json::to_vec(&header).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let path = dir.join(name);
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h);
    bytes.extend(data);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ws-robust-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load_all(cat: &weightstream::Catalog, threads: usize, control: Control) -> weightstream::Result<Vec<HostTensor>> {
    let plan = Plan::new(cat, &PlanOptions::default())?;
    let cpu = CpuExecutor::new(&Staging { threads: Some(threads), ..Default::default() })?;
    let mut out = vec![];
    cpu.stream(cat, &plan, control, |t| {
        out.push(t);
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn a_file_that_shrinks_during_a_load_is_a_read_error() {
    let d = tempdir("shrink");
    let path = write_checkpoint(&d, "m.safetensors", 8, 100_000);
    let cat = weightstream::open(&path).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
    match load_all(&cat, 2, Control::default()) {
        Err(Error::Read { file, tensor, offset, .. }) => {
            assert_eq!(file, path);
            assert!(tensor.starts_with('t'), "{tensor}");
            assert!(offset < len, "{offset}");
        }
        other => panic!("expected a read error, got {:?}", other.map(|v| v.len())),
    }
}

#[test]
fn an_injected_read_error_names_file_tensor_and_offset() {
    let d = tempdir("inject");
    let path = write_checkpoint(&d, "m.safetensors", 6, 50_000);
    let clean = weightstream::open(&path).unwrap();
    let victim = clean.tensor("t3").unwrap().1.clone();
    let bad = victim.offset + victim.nbytes / 2..victim.offset + victim.nbytes / 2 + 1;
    let opener = |p: &Path| -> io::Result<SharedSource> { Ok(Arc::new(FailingSource { inner: FileSource::open(p)?, bad: bad.clone() })) };
    let cat = open_with(&path, &opener).unwrap();
    match load_all(&cat, 2, Control::default()) {
        Err(e @ Error::Read { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("m.safetensors") && msg.contains("tensor 't3'") && msg.contains("injected"), "{msg}");
        }
        other => panic!("expected a read error, got {:?}", other.map(|v| v.len())),
    }
    // convert through the same failing source leaves nothing behind.
    let out = d.join("out.safetensors");
    let e = convert_catalog(&cat, &out, &ConvertOptions::default(), Control::default()).unwrap_err();
    assert!(matches!(e, Error::Read { .. }), "{e}");
    let leftovers: Vec<_> =
        std::fs::read_dir(&d).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains("partial")).collect();
    assert!(leftovers.is_empty() && !out.exists());
}

#[test]
fn cancellation_from_the_api_stops_the_load() {
    let d = tempdir("cancel");
    let path = write_checkpoint(&d, "m.safetensors", 10, 10_000);
    let cat = weightstream::open(&path).unwrap();
    let cancel = AtomicBool::new(false);
    let progress = |p: weightstream::Progress| {
        if p.tensors_done >= 3 {
            cancel.store(true, Ordering::Relaxed);
        }
    };
    let r = load_all(&cat, 2, Control { progress: Some(&progress), cancel: Some(&cancel) });
    assert!(matches!(r, Err(Error::Cancelled)), "{:?}", r.map(|v| v.len()));
}

#[test]
fn concurrent_loads_equal_serial_loads() {
    let d = tempdir("concurrent");
    let a = write_checkpoint(&d, "a.safetensors", 6, 30_001);
    let b = write_checkpoint(&d, "b.safetensors", 5, 17_003);
    let serial_a = load_all(&weightstream::open(&a).unwrap(), 1, Control::default()).unwrap();
    let serial_b = load_all(&weightstream::open(&b).unwrap(), 1, Control::default()).unwrap();
    let shared = weightstream::open(&a).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (path, shared) = (if i % 2 == 0 { &a } else { &b }, &shared);
                s.spawn(move || {
                    // Half open their own catalog, the others share one.
                    let own;
                    let cat = if i % 4 < 2 {
                        own = weightstream::open(path).unwrap();
                        &own
                    } else {
                        shared
                    };
                    (cat.root.clone(), load_all(cat, 2, Control::default()).unwrap())
                })
            })
            .collect();
        for h in handles {
            let (root, got) = h.join().unwrap();
            let want = if root == a { &serial_a } else { &serial_b };
            assert!(&got == want, "{}: a concurrent load differs from the serial one", root.display());
        }
    });
}
