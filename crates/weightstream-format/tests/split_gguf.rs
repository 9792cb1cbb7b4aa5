//! GGUF split sets (llama.cpp's `llama-gguf-split` layout) open as one
//! catalog: from the first file, from a later shard or from the directory,
//! with every tensor of every shard in shard then offset order, the first
//! shard's metadata, and each tensor's bytes where they are. Every way a set
//! can be broken is a typed error naming the file. The sets are written here,
//! byte by byte, as llama-gguf-split writes them (split.no u16, split.count
//! u16, split.tensors.count i32 in every shard; the model's metadata only in
//! the first).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use weightstream_format::{open, Catalog, ErrorKind, FormatError};

// ---------------------------------------------------------------- writing

enum Val {
    U16(u16),
    I32(i32),
    U32(u32),
    Str(&'static str),
}

fn gstr(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// A GGUF v3 file: `kv`, then F32 tensors of `(name, values)` packed at the
/// default alignment of 32.
fn gguf_bytes(kv: &[(&str, Val)], tensors: &[(String, Vec<f32>)]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kv.len() as u64).to_le_bytes());
    for (k, v) in kv {
        gstr(&mut b, k);
        match v {
            Val::U16(x) => {
                b.extend(2u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Val::U32(x) => {
                b.extend(4u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Val::I32(x) => {
                b.extend(5u32.to_le_bytes());
                b.extend(x.to_le_bytes());
            }
            Val::Str(s) => {
                b.extend(8u32.to_le_bytes());
                gstr(&mut b, s);
            }
        }
    }
    let mut offset = 0u64;
    let mut offsets = Vec::new();
    for (name, vals) in tensors {
        gstr(&mut b, name);
        b.extend(1u32.to_le_bytes()); // n_dims
        b.extend((vals.len() as u64).to_le_bytes());
        b.extend(0u32.to_le_bytes()); // F32
        b.extend(offset.to_le_bytes());
        offsets.push(offset);
        offset = (offset + 4 * vals.len() as u64).next_multiple_of(32);
    }
    b.resize(b.len().next_multiple_of(32), 0);
    let data = b.len();
    for ((_, vals), off) in tensors.iter().zip(offsets) {
        b.resize(data + off as usize, 0);
        for v in vals {
            b.extend(v.to_le_bytes());
        }
    }
    b.resize(b.len().next_multiple_of(32), 0);
    b
}

/// Tensor `i` of a test model: a few distinct values.
fn tensor(i: usize) -> (String, Vec<f32>) {
    (format!("blk.{i}.weight"), (0..8 + 8 * (i % 3)).map(|j| (i * 100 + j) as f32).collect())
}

/// The shards of a set of `count` files holding `per` tensors each, as
/// llama-gguf-split writes them: (file name, keys, tensors).
struct Shard {
    name: String,
    kv: Vec<(&'static str, Val)>,
    tensors: Vec<(String, Vec<f32>)>,
}

fn split_set(prefix: &str, count: usize, per: usize) -> Vec<Shard> {
    (0..count)
        .map(|no| {
            let mut kv = Vec::new();
            if no == 0 {
                kv.push(("general.architecture", Val::Str("llama")));
                kv.push(("general.name", Val::Str("split test")));
                kv.push(("llama.block_count", Val::U32(count as u32 * per as u32)));
            }
            kv.push(("split.no", Val::U16(no as u16)));
            kv.push(("split.count", Val::U16(count as u16)));
            kv.push(("split.tensors.count", Val::I32((count * per) as i32)));
            Shard {
                name: format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1),
                kv,
                tensors: (no * per..(no + 1) * per).map(tensor).collect(),
            }
        })
        .collect()
}

fn set_key(s: &mut Shard, key: &'static str, v: Val) {
    match s.kv.iter_mut().find(|(k, _)| *k == key) {
        Some(slot) => slot.1 = v,
        None => s.kv.push((key, v)),
    }
}

fn drop_key(s: &mut Shard, key: &str) {
    s.kv.retain(|(k, _)| *k != key);
}

/// A fresh directory under the system's temporary directory, removed when
/// dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!("ws-split-gguf-{}-{}-{what}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create a temporary directory");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(dir: &Path, shards: &[Shard]) -> Vec<PathBuf> {
    shards
        .iter()
        .map(|s| {
            let p = dir.join(&s.name);
            std::fs::write(&p, gguf_bytes(&s.kv, &s.tensors)).expect("write a shard");
            p
        })
        .collect()
}

// ---------------------------------------------------------------- checking

fn names(cat: &Catalog) -> Vec<String> {
    cat.tensors.iter().map(|t| t.name.clone()).collect()
}

/// Every tensor of `count * per`, in order, in its shard, with its bytes.
fn check_whole(cat: &Catalog, paths: &[PathBuf], per: usize) {
    let want: Vec<(String, Vec<f32>)> = (0..paths.len() * per).map(tensor).collect();
    assert_eq!(names(cat), want.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
    assert_eq!(cat.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(), paths);
    for (i, (t, (_, vals))) in cat.tensors.iter().zip(&want).enumerate() {
        assert_eq!(t.file, i / per, "{}", t.name);
        assert_eq!(t.shape, vec![vals.len() as u64]);
        let mut got = vec![0u8; t.nbytes as usize];
        cat.files[t.file].source.read_at(t.offset, &mut got).expect("read the tensor");
        let want: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(got, want, "{}: bytes", t.name);
    }
    // The model's metadata is the first shard's.
    let arch = cat.metadata.gguf_value("general.architecture").and_then(|v| v.as_str().map(str::to_string));
    assert_eq!(arch.as_deref(), Some("llama"));
}

fn err(path: &Path) -> FormatError {
    match open(path) {
        Ok(cat) => panic!("{}: opened with {} tensors, expected an error", path.display(), cat.tensors.len()),
        Err(e) => e,
    }
}

/// A `bad_split` error naming `file`, its message containing `says`.
fn assert_bad_split(e: &FormatError, file: &Path, says: &str) {
    assert!(matches!(e.kind, ErrorKind::BadSplit(_)), "{e}");
    assert_eq!(e.kind.code(), "bad_split");
    assert_eq!(e.file, file, "{e}");
    assert!(e.to_string().contains(says), "{e}: should say {says:?}");
}

// ---------------------------------------------------------------- opening

#[test]
fn a_set_opens_whole_from_its_first_file_any_shard_or_its_directory() {
    let d = TempDir::new("whole");
    let paths = write(&d.0, &split_set("model", 3, 2));
    for start in [&paths[0], &paths[1], &paths[2], &d.0] {
        let cat = open(start).unwrap_or_else(|e| panic!("{}: {e}", start.display()));
        check_whole(&cat, &paths, 2);
        if start.is_file() {
            assert_eq!(&cat.root, start, "root is the file that was opened");
        }
    }
}

#[test]
fn a_relative_path_finds_its_shards_beside_it() {
    let d = TempDir::new("relative");
    let paths = write(&d.0, &split_set("m", 2, 3));
    // Relative to the process's directory: as a user types it.
    let cwd = std::env::current_dir().expect("cwd");
    let rel = pathdiff(&paths[1], &cwd);
    let cat = open(&rel).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
    assert_eq!(cat.tensors.len(), 6);
}

/// `to` relative to `from` through `..` components (both absolute).
fn pathdiff(to: &Path, from: &Path) -> PathBuf {
    let ups = from.components().count() - 1;
    let mut p = PathBuf::new();
    for _ in 0..ups {
        p.push("..");
    }
    p.join(to.strip_prefix("/").expect("absolute"))
}

#[test]
fn one_file_sets_and_files_without_split_keys_open_as_before() {
    let d = TempDir::new("single");
    // llama-gguf-split with nothing to split writes count 1.
    let mut one = split_set("solo", 1, 4);
    let plain =
        Shard { name: "plain.gguf".into(), kv: vec![("general.architecture", Val::Str("llama"))], tensors: (0..4).map(tensor).collect() };
    one.push(plain);
    let paths = write(&d.0, &one);
    for p in &paths {
        let cat = open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(cat.files.len(), 1);
        assert_eq!(cat.tensors.len(), 4);
    }
}

#[test]
fn a_set_of_many_shards_keeps_shard_order() {
    let d = TempDir::new("many");
    let paths = write(&d.0, &split_set("Llama-3-Q4_0", 11, 1));
    let cat = open(&paths[7]).unwrap_or_else(|e| panic!("{e}"));
    check_whole(&cat, &paths, 1);
}

// ---------------------------------------------------------------- refusing

#[test]
fn a_missing_shard_is_named_from_any_start() {
    let d = TempDir::new("missing");
    let paths = write(&d.0, &split_set("model", 3, 2));
    std::fs::remove_file(&paths[1]).expect("remove");
    for start in [&paths[0], &paths[2], &d.0] {
        assert_bad_split(&err(start), &paths[1], "shard 2 of 3 is missing");
    }
    // Without the first file: the directory still names it.
    let d = TempDir::new("missing-first");
    let paths = write(&d.0, &split_set("model", 3, 2));
    std::fs::remove_file(&paths[0]).expect("remove");
    for start in [&paths[1], &d.0] {
        assert_bad_split(&err(start), &paths[0], "shard 1 of 3 is missing");
    }
}

#[test]
fn a_shard_that_is_another_shards_file_is_refused() {
    let d = TempDir::new("linked");
    let paths = write(&d.0, &split_set("model", 3, 2));
    std::fs::remove_file(&paths[2]).expect("remove");
    std::fs::hard_link(&paths[1], &paths[2]).expect("link");
    assert_bad_split(&err(&paths[0]), &paths[2], "same file as shard 2");
    // A copy of shard 2 under shard 3's name: its header says so.
    std::fs::remove_file(&paths[2]).expect("remove");
    std::fs::copy(&paths[1], &paths[2]).expect("copy");
    assert_bad_split(&err(&paths[0]), &paths[2], "expected shard 3 of 3, the header says shard 2 of 3");
}

#[test]
fn split_no_disagreeing_with_the_name_is_refused() {
    let d = TempDir::new("no");
    let mut set = split_set("model", 3, 2);
    set_key(&mut set[1], "split.no", Val::U16(2));
    let paths = write(&d.0, &set);
    assert_bad_split(&err(&paths[0]), &paths[1], "expected shard 2 of 3, the header says shard 3 of 3");
    // Opened from that shard itself: its name and header disagree.
    assert_bad_split(&err(&paths[1]), &paths[1], "the name says shard 2 of 3, the header says 3 of 3");
}

#[test]
fn split_count_disagreeing_with_the_name_or_the_set_is_refused() {
    let d = TempDir::new("count");
    let mut set = split_set("model", 3, 2);
    set_key(&mut set[2], "split.count", Val::U16(4));
    let paths = write(&d.0, &set);
    assert_bad_split(&err(&paths[0]), &paths[2], "expected shard 3 of 3, the header says shard 3 of 4");
    assert_bad_split(&err(&paths[2]), &paths[2], "the name says shard 3 of 3, the header says 3 of 4");
    // The first file's own count disagrees with its name.
    let d = TempDir::new("count-first");
    let mut set = split_set("model", 3, 2);
    set_key(&mut set[0], "split.count", Val::U16(2));
    let paths = write(&d.0, &set);
    assert_bad_split(&err(&paths[0]), &paths[0], "the name says shard 1 of 3, the header says 1 of 2");
}

#[test]
fn a_tensor_total_other_than_split_tensors_count_is_refused() {
    let d = TempDir::new("total");
    let mut set = split_set("model", 3, 2);
    for s in &mut set {
        set_key(s, "split.tensors.count", Val::I32(7));
    }
    let paths = write(&d.0, &set);
    assert_bad_split(&err(&paths[1]), &paths[0], "'split.tensors.count' is 7, the 3 shards hold 6 tensors");
    // A later shard disagreeing with the first.
    let d = TempDir::new("total-later");
    let mut set = split_set("model", 3, 2);
    set_key(&mut set[2], "split.tensors.count", Val::I32(5));
    let paths = write(&d.0, &set);
    assert_bad_split(&err(&paths[0]), &paths[2], "'split.tensors.count' is 5, the first shard says 6");
}

#[test]
fn the_same_tensor_in_two_shards_is_refused() {
    let d = TempDir::new("dup");
    let mut set = split_set("model", 3, 2);
    set[2].tensors[1] = tensor(2); // blk.2.weight is shard 2's first tensor
    let paths = write(&d.0, &set);
    let e = err(&paths[0]);
    assert_eq!(e.kind, ErrorKind::DuplicateTensor, "{e}");
    assert_eq!(e.kind.code(), "duplicate_tensor");
    assert_eq!(e.file, paths[2], "{e}");
    assert_eq!(e.tensor.as_deref(), Some("blk.2.weight"), "{e}");
}

#[test]
fn bad_split_keys_are_refused() {
    let cases: Vec<(&str, Box<dyn Fn(&mut Vec<Shard>)>, usize, &str)> = vec![
        ("count-zero", Box::new(|s: &mut Vec<Shard>| set_key(&mut s[0], "split.count", Val::U16(0))), 0, "'split.count' is 0"),
        ("count-string", Box::new(|s: &mut Vec<Shard>| set_key(&mut s[0], "split.count", Val::Str("3"))), 0, "'split.count' is string"),
        ("no-missing", Box::new(|s: &mut Vec<Shard>| drop_key(&mut s[1], "split.no")), 1, "'split.no' is missing"),
        (
            "no-too-big",
            Box::new(|s: &mut Vec<Shard>| set_key(&mut s[1], "split.no", Val::U16(3))),
            1,
            "'split.no' is 3, but the set has 3 files",
        ),
        ("total-missing", Box::new(|s: &mut Vec<Shard>| drop_key(&mut s[0], "split.tensors.count")), 0, "has no 'split.tensors.count'"),
        (
            "total-negative",
            Box::new(|s: &mut Vec<Shard>| set_key(&mut s[0], "split.tensors.count", Val::I32(-1))),
            0,
            "not a non-negative integer",
        ),
    ];
    for (what, break_it, bad, says) in cases {
        let d = TempDir::new(what);
        let mut set = split_set("model", 3, 2);
        break_it(&mut set);
        let paths = write(&d.0, &set);
        let e = err(&paths[bad]);
        assert_bad_split(&e, &paths[bad], says);
        // From the first file too, whichever shard is broken.
        assert_bad_split(&err(&paths[0]), &paths[bad], says);
    }
}

#[test]
fn a_shard_whose_name_does_not_follow_the_rule_cannot_find_its_set() {
    let d = TempDir::new("renamed");
    let set = split_set("model", 2, 2);
    let p = d.0.join("model.gguf");
    std::fs::write(&p, gguf_bytes(&set[0].kv, &set[0].tensors)).expect("write");
    assert_bad_split(&err(&p), &p, "<prefix>-NNNNN-of-NNNNN.gguf");
    // Nor in a directory of its own (one *.gguf: that file).
    assert_bad_split(&err(&d.0), &p, "<prefix>-NNNNN-of-NNNNN.gguf");
}

#[test]
fn a_directory_with_a_set_and_more_asks_which_to_pass() {
    // One set plus an unrelated GGUF.
    let d = TempDir::new("mixed");
    let mut files = split_set("model", 2, 2);
    files.push(Shard { name: "other.gguf".into(), kv: vec![], tensors: vec![tensor(0)] });
    write(&d.0, &files);
    let e = err(&d.0);
    assert_eq!(e.kind.code(), "no_checkpoint", "{e}");
    assert_eq!(e.file, d.0);
    let msg = e.to_string();
    assert!(msg.contains("split set 'model-00001-of-00002.gguf' (2 of its 2 files here)") && msg.contains("'other.gguf'"), "{msg}");
    // Two sets.
    let d = TempDir::new("two-sets");
    let mut files = split_set("a", 2, 1);
    files.extend(split_set("b", 3, 1));
    write(&d.0, &files);
    let msg = err(&d.0).to_string();
    assert!(msg.contains("'a-00001-of-00002.gguf'") && msg.contains("'b-00001-of-00003.gguf'"), "{msg}");
    // Two sets with one prefix (a re-split left beside the old one).
    let d = TempDir::new("re-split");
    let mut files = split_set("m", 2, 3);
    files.extend(split_set("m", 3, 2));
    let paths = write(&d.0, &files);
    let msg = err(&d.0).to_string();
    assert!(msg.contains("'m-00001-of-00002.gguf'") && msg.contains("'m-00001-of-00003.gguf'"), "{msg}");
    // Each set still opens from its first file.
    assert_eq!(open(&paths[0]).expect("the 2-file set").tensors.len(), 6);
    assert_eq!(open(&paths[2]).expect("the 3-file set").tensors.len(), 6);
}
