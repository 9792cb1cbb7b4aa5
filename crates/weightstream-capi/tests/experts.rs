//! ws_open refuses a GGUF whose expert counts llama.cpp would abort on or
//! that its tensors disagree with (issue 55: a dense Qwen2 GGUF declaring
//! `qwen2.expert_count = 4294967295` aborted llama.cpp through the
//! adapter). The same cases as test_capi.c's, through the Rust ABI.

use std::ffi::{CStr, CString};

use weightstream_c::{ws_close, ws_last_error, ws_open, WsStatus};

enum V {
    U32(u32),
    I32(i32),
    Str(&'static str),
}

fn gstr(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

/// A GGUF v3 file: `kv`, and F32 `tensors` (shapes outermost first) of zeros.
fn gguf(kv: &[(&str, V)], tensors: &[(&str, &[u64])]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kv.len() as u64).to_le_bytes());
    for (k, v) in kv {
        gstr(&mut b, k);
        match v {
            V::U32(x) => b.extend(4u32.to_le_bytes().into_iter().chain(x.to_le_bytes())),
            V::I32(x) => b.extend(5u32.to_le_bytes().into_iter().chain(x.to_le_bytes())),
            V::Str(s) => {
                b.extend(8u32.to_le_bytes());
                gstr(&mut b, s);
            }
        }
    }
    let mut offset = 0u64;
    for (name, shape) in tensors {
        gstr(&mut b, name);
        b.extend((shape.len() as u32).to_le_bytes());
        shape.iter().rev().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(0u32.to_le_bytes()); // F32
        b.extend(offset.to_le_bytes());
        offset += (shape.iter().product::<u64>() * 4).next_multiple_of(32);
    }
    b.resize(b.len().next_multiple_of(32) + offset as usize, 0);
    b
}

/// ws_open of `file`: its status and ws_last_error.
fn open(dir: &std::path::Path, name: &str, file: Vec<u8>) -> (WsStatus, String) {
    let path = dir.join(name);
    std::fs::write(&path, file).unwrap();
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let mut ckpt = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and a valid out pointer; closed below.
    let s = unsafe { ws_open(c.as_ptr(), &mut ckpt) };
    // SAFETY: ws_last_error's string lives until this thread's next failure.
    let err = unsafe { CStr::from_ptr(ws_last_error()) }.to_string_lossy().into_owned();
    assert_eq!(ckpt.is_null(), s != WsStatus::Ok);
    // SAFETY: from ws_open (or NULL).
    unsafe { ws_close(ckpt) };
    (s, err)
}

#[test]
fn expert_counts_the_tensors_do_not_bear_out_are_refused() {
    let dir = std::env::temp_dir().join(format!("ws-capi-experts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let arch = |a: &'static str| ("general.architecture", V::Str(a));
    let embd: (&str, &[u64]) = ("token_embd.weight", &[4, 8]);
    let exps: (&str, &[u64]) = ("blk.0.ffn_up_exps.weight", &[4, 2, 8]);
    let router: (&str, &[u64]) = ("blk.0.ffn_gate_inp.weight", &[4, 8]);
    let refused: Vec<(&str, Vec<u8>, &str)> = vec![
        // The defect: a dense model with 2^32 - 1 experts (llama.cpp asserts <= 512).
        ("dense", gguf(&[arch("qwen2"), ("qwen2.expert_count", V::U32(u32::MAX))], &[embd]), "qwen2.expert_count is 4294967295"),
        (
            "dense4",
            gguf(&[arch("qwen2"), ("qwen2.expert_count", V::U32(4)), ("qwen2.expert_used_count", V::U32(2))], &[embd]),
            "no tensor holds experts",
        ),
        (
            "used5",
            gguf(&[arch("qwen3moe"), ("qwen3moe.expert_count", V::U32(4)), ("qwen3moe.expert_used_count", V::U32(5))], &[embd, exps]),
            "qwen3moe.expert_used_count is 5",
        ),
        (
            "used0",
            gguf(&[arch("qwen3moe"), ("qwen3moe.expert_count", V::U32(4)), ("qwen3moe.expert_used_count", V::U32(0))], &[embd, exps]),
            "must be 1..=4",
        ),
        (
            "three",
            gguf(&[arch("qwen3moe"), ("qwen3moe.expert_count", V::U32(3)), ("qwen3moe.expert_used_count", V::U32(2))], &[embd, exps]),
            "blk.0.ffn_up_exps.weight",
        ),
        ("absent", gguf(&[arch("qwen3moe")], &[embd, router]), "blk.0.ffn_gate_inp.weight"),
        ("negative", gguf(&[arch("qwen2"), ("qwen2.expert_count", V::I32(-1))], &[embd]), "not a count"),
        (
            "legacy",
            gguf(
                &[arch("llama"), ("llama.expert_count", V::U32(4)), ("llama.expert_used_count", V::U32(2))],
                &[embd, ("blk.0.ffn_up.4.weight", &[2, 8])],
            ),
            "blk.0.ffn_up.4.weight",
        ),
    ];
    for (name, file, message) in refused {
        let (s, err) = open(&dir, &format!("{name}.gguf"), file);
        assert_eq!(s, WsStatus::Format, "{name}: {err}");
        assert!(err.contains(message) && err.contains(&format!("{name}.gguf")), "{name}: {err}");
    }
    let opened: Vec<(&str, Vec<u8>)> = vec![
        ("plain", gguf(&[arch("qwen2")], &[embd])),
        ("zero", gguf(&[arch("qwen2"), ("qwen2.expert_count", V::U32(0))], &[embd])),
        (
            "moe",
            gguf(
                &[arch("qwen3moe"), ("qwen3moe.expert_count", V::U32(4)), ("qwen3moe.expert_used_count", V::U32(2))],
                &[embd, exps, router],
            ),
        ),
        (
            "legacy_ok",
            gguf(
                &[arch("llama"), ("llama.expert_count", V::U32(4)), ("llama.expert_used_count", V::U32(2))],
                &[embd, ("blk.0.ffn_up.3.weight", &[2, 8])],
            ),
        ),
    ];
    for (name, file) in opened {
        let (s, err) = open(&dir, &format!("{name}.gguf"), file);
        assert_eq!(s, WsStatus::Ok, "{name}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
