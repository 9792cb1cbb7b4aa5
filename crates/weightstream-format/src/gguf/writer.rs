//! A GGUF (version 3) header for a file whose tensor data the caller
//! writes after it: the metadata, the tensor infos with their offsets
//! (each tensor's data 32-byte aligned, as gguf-py writes them), and the
//! padding up to the data section.

use super::reader::DEFAULT_ALIGNMENT;
use super::MAX_TENSOR_NAME_LEN;

/// A metadata value, of the GGUF types a converted model's keys have.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteValue {
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    F32Array(Vec<f32>),
    I32Array(Vec<i32>),
}

/// One tensor's entry: its name, its dimensions outermost first (as
/// safetensors; GGUF lists them innermost first), its ggml type id and the
/// bytes of its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDecl {
    pub name: String,
    pub shape: Vec<u64>,
    pub ggml_type: u32,
    pub nbytes: u64,
}

// gguf_type ids (ggml's gguf.h).
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn value(out: &mut Vec<u8>, v: &WriteValue) {
    let array = |out: &mut Vec<u8>, ty: u32, n: usize| {
        out.extend(T_ARRAY.to_le_bytes());
        out.extend(ty.to_le_bytes());
        out.extend((n as u64).to_le_bytes());
    };
    match v {
        WriteValue::U32(x) => {
            out.extend(T_U32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        WriteValue::I32(x) => {
            out.extend(T_I32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        WriteValue::F32(x) => {
            out.extend(T_F32.to_le_bytes());
            out.extend(x.to_le_bytes());
        }
        WriteValue::Bool(b) => {
            out.extend(T_BOOL.to_le_bytes());
            out.push(*b as u8);
        }
        WriteValue::Str(s) => {
            out.extend(T_STRING.to_le_bytes());
            string(out, s);
        }
        WriteValue::StrArray(a) => {
            array(out, T_STRING, a.len());
            a.iter().for_each(|s| string(out, s));
        }
        WriteValue::F32Array(a) => {
            array(out, T_F32, a.len());
            a.iter().for_each(|x| out.extend(x.to_le_bytes()));
        }
        WriteValue::I32Array(a) => {
            array(out, T_I32, a.len());
            a.iter().for_each(|x| out.extend(x.to_le_bytes()));
        }
    }
}

/// Where each tensor's data starts, relative to the data section, each
/// aligned to 32 bytes.
pub fn data_offsets(tensors: &[TensorDecl]) -> Vec<u64> {
    let mut at = 0u64;
    tensors
        .iter()
        .map(|t| {
            let here = at;
            at = (at + t.nbytes).next_multiple_of(DEFAULT_ALIGNMENT);
            here
        })
        .collect()
}

/// The header: magic, version 3, counts, metadata, tensor infos, and the
/// padding up to the data section. A name longer than ggml's limit is an
/// error (llama.cpp refuses such a file).
pub fn header(kv: &[(String, WriteValue)], tensors: &[TensorDecl]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(1 << 16);
    out.extend(b"GGUF");
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kv.len() as u64).to_le_bytes());
    for (k, v) in kv {
        string(&mut out, k);
        value(&mut out, v);
    }
    for (t, off) in tensors.iter().zip(data_offsets(tensors)) {
        if t.name.len() as u64 > MAX_TENSOR_NAME_LEN {
            return Err(format!("tensor name '{}' is longer than GGUF's {MAX_TENSOR_NAME_LEN} bytes", t.name));
        }
        string(&mut out, &t.name);
        out.extend((t.shape.len() as u32).to_le_bytes());
        t.shape.iter().rev().for_each(|d| out.extend(d.to_le_bytes()));
        out.extend(t.ggml_type.to_le_bytes());
        out.extend(off.to_le_bytes());
    }
    out.resize((out.len() as u64).next_multiple_of(DEFAULT_ALIGNMENT) as usize, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::read_header;
    use weightstream_io::MemorySource;

    /// What the writer writes, the reader reads back.
    #[test]
    fn the_reader_reads_the_header_back() {
        let kv = vec![
            ("general.architecture".to_string(), WriteValue::Str("llama".into())),
            ("llama.block_count".into(), WriteValue::U32(2)),
            ("x.f".into(), WriteValue::F32(0.5)),
            ("x.b".into(), WriteValue::Bool(true)),
            ("x.s".into(), WriteValue::StrArray(vec!["a".into(), "bc".into()])),
            ("x.i".into(), WriteValue::I32Array(vec![1, -2])),
            ("x.g".into(), WriteValue::F32Array(vec![1.5])),
        ];
        let tensors = vec![
            TensorDecl { name: "a".into(), shape: vec![3, 5], ggml_type: 30, nbytes: 30 },
            TensorDecl { name: "b".into(), shape: vec![7], ggml_type: 0, nbytes: 28 },
        ];
        let mut file = header(&kv, &tensors).unwrap();
        assert_eq!(file.len() % 32, 0);
        let data_start = file.len() as u64;
        file.resize(file.len() + 32 + 28, 0);
        let h = read_header(&MemorySource::new("t.gguf", file)).unwrap();
        assert_eq!(h.tensors.len(), 2);
        assert_eq!(h.metadata.len(), 7);
        assert_eq!(h.tensors[0].ne, vec![5, 3]);
        assert_eq!(h.tensors[1].offset, 32);
        assert_eq!(h.data_offset, data_start);
        assert!(header(&kv, &[TensorDecl { name: "n".repeat(64), shape: vec![1], ggml_type: 0, nbytes: 4 }]).is_err());
    }
}
