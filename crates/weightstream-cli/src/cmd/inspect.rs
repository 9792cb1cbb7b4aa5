//! `weightstream inspect`: what a checkpoint holds.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::ser::SerializeSeq;
use serde::Serialize;
use serde_json::{json, Value as Json};
use std::io::Write;
use weightstream::format::{Catalog, Format, GlobalOp, Metadata, Role, TensorInfo};

use crate::human::{self, Table};
use crate::report::{CmdResult, OrFail};

#[derive(clap::Args)]
#[command(
    about = "List a checkpoint's tensors, dtypes, shapes, sizes and metadata",
    long_about = "Reads only the checkpoint's headers (a 100 GB file opens in milliseconds) and prints \
every tensor with its dtype, shape (outermost dimension first) and size, totals per dtype, the key \
metadata, and for FP8 weights the scale tensor and its layout. A malformed file fails with an error \
naming the file, the tensor and the byte offset.",
    after_help = "Examples:\n  \
weightstream inspect model-q4_0.gguf\n  \
weightstream inspect ./Qwen3-8B-FP8 --all-metadata\n  \
weightstream inspect model.safetensors --json | jq '.tensors[0]'"
)]
pub struct Args {
    /// A .gguf or .safetensors file, a checkpoint directory, or a URL: s3://bucket/key, s3://bucket/prefix/ (a directory of shards), the same with gs:// or az:// (abfs://, abfss://, https://ACCOUNT.blob.core.windows.net/container/...), http(s)://host/file
    pub path: PathBuf,
    /// Print JSON: {"format", "metadata", "tensors": [{"name", "dtype", "shape", "nbytes", ...}], ...}
    #[arg(long)]
    pub json: bool,
    /// Show every metadata key (long values abbreviated) instead of the key ones
    #[arg(long)]
    pub all_metadata: bool,
    /// Load a GGUF file whose metadata declares a transform of the weights
    /// (a Hadamard rotation, permutation, codebook) weightstream does not
    /// apply, ignoring it: the weights come out as stored, untransformed
    #[arg(long)]
    pub ignore_transform: bool,
    #[command(flatten)]
    pub cache: crate::cache_arg::CacheArg,
}

pub fn run(args: &Args) -> CmdResult {
    let opts = weightstream::format::OpenOptions { ignore_transforms: args.ignore_transform };
    let cat = weightstream::open_with_cache(&args.path, Default::default(), opts, args.cache.cache.as_deref()).or_fail(args.json)?;
    if args.json {
        write_json(&cat).or_fail(args.json)?;
    } else {
        print!("{}", to_text(&cat, args.all_metadata));
    }
    Ok(())
}

fn role_json(cat: &Catalog, t: &TensorInfo) -> Json {
    match t.role {
        Role::Data => json!("data"),
        Role::Scale { weight } => json!({"scale_of": cat.tensors[weight].name}),
        Role::InputScale => json!("activation_scale"),
    }
}

fn tensor_json(cat: &Catalog, t: &TensorInfo) -> Json {
    let mut o = json!({
        "name": t.name,
        "dtype": t.dtype,
        "shape": t.shape,
        "nbytes": t.nbytes,
        "file": t.file,
        "offset": t.offset,
        "role": role_json(cat, t),
    });
    match t.encoding() {
        Ok(e) => o["encoding"] = json!(e.name()),
        Err(reason) => o["unsupported"] = json!(reason),
    }
    if let Some(s) = &t.scale {
        o["scale"] = json!({
            "tensor": cat.tensors[s.tensor].name,
            "dtype": s.dtype,
            "layout": s.layout.kind,
            "block": [s.layout.block_rows, s.layout.block_cols],
            "grid": [s.layout.grid_rows, s.layout.grid_cols],
        });
    }
    if let Some(p) = &t.packed {
        o["packed"] = json!({
            "scheme": p.scheme,
            "name": p.name,
            "shape": p.shape,
            "global": p.global.map(|g| json!({"tensor": cat.tensors[g.tensor].name, "value": g.value, "op": g.op})),
            "zero_points": p.zeros.map(|z| &cat.tensors[z].name),
        });
    }
    o
}

/// The tensor list, serialized one entry at a time: a GGUF of a million
/// small tensors once took 3.9 KB of JSON tree per tensor before the first
/// byte was printed (issue 14); now memory stays at the catalog's.
struct Tensors<'a>(&'a Catalog);

impl Serialize for Tensors<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.tensors.len()))?;
        for t in &self.0.tensors {
            seq.serialize_element(&tensor_json(self.0, t))?;
        }
        seq.end()
    }
}

/// `inspect --json`: the same document as ever, keys in the same order.
#[derive(Serialize)]
struct InspectJson<'a> {
    format: weightstream::Format,
    path: String,
    files: Json,
    metadata: Json,
    tensors: Tensors<'a>,
    totals: Json,
    #[serde(skip_serializing_if = "Option::is_none")]
    gguf: Option<Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<&'a Json>,
}

/// Print `inspect --json` to stdout as it is produced.
fn write_json(cat: &Catalog) -> Result<(), weightstream::Error> {
    let doc = InspectJson {
        format: cat.format,
        path: cat.root.display().to_string(),
        files: Json::Array(
            cat.files
                .iter()
                .map(|f| json!({"path": f.path.display().to_string(), "nbytes": f.source.len(), "source": f.source.name(), "source_note": f.source.note()}))
                .collect(),
        ),
        metadata: cat.metadata.to_json(),
        tensors: Tensors(cat),
        totals: totals(cat).into_iter().map(|(k, (n, e, b))| (k.to_string(), json!({"tensors": n, "elements": e, "nbytes": b}))).collect::<serde_json::Map<_, _>>().into(),
        gguf: match &cat.metadata {
            Metadata::Gguf { version, alignment, .. } => Some(json!({"version": version, "alignment": alignment})),
            _ => None,
        },
        config: cat.config.as_ref(),
    };
    let out = std::io::stdout().lock();
    let mut w = std::io::BufWriter::with_capacity(1 << 16, out);
    let io = |e: std::io::Error| weightstream::Error::Io { path: "<stdout>".into(), source: e };
    serde_json::to_writer_pretty(&mut w, &doc).map_err(|e| io(e.into()))?;
    w.write_all(b"\n").map_err(io)?;
    w.flush().map_err(io)
}

/// dtype -> (tensors, elements, bytes)
fn totals(cat: &Catalog) -> BTreeMap<&'static str, (u64, u64, u64)> {
    let mut m = BTreeMap::new();
    for t in &cat.tensors {
        let e = m.entry(t.dtype.name()).or_insert((0, 0, 0));
        e.0 += 1;
        e.1 += t.n_elems();
        e.2 += t.nbytes;
    }
    m
}

fn key_gguf_metadata(cat: &Catalog, all: bool) -> Vec<(String, String)> {
    let Metadata::Gguf { kv, .. } = &cat.metadata else { return vec![] };
    if all {
        return kv.iter().map(|(k, v)| (k.clone(), v.summary(100))).collect();
    }
    let arch = cat.metadata.gguf_value("general.architecture").and_then(|v| v.as_str()).unwrap_or("");
    let wanted: Vec<String> = ["general.architecture", "general.name", "general.file_type", "general.quantization_version"]
        .iter()
        .map(|s| s.to_string())
        .chain(
            [
                "context_length",
                "embedding_length",
                "block_count",
                "feed_forward_length",
                "attention.head_count",
                "attention.head_count_kv",
                "rope.freq_base",
                "vocab_size",
            ]
            .iter()
            .map(|s| format!("{arch}.{s}")),
        )
        .chain(["tokenizer.ggml.model".to_string(), "tokenizer.ggml.tokens".to_string()])
        .collect();
    wanted.into_iter().filter_map(|k| cat.metadata.gguf_value(&k).map(|v| (k, v.summary(60)))).collect()
}

fn scale_column(cat: &Catalog, t: &TensorInfo) -> String {
    match (&t.scale, &t.packed, t.role) {
        (Some(s), Some(p), _) => {
            let global = match p.global {
                Some(g) => {
                    format!(", global {} {} {}", if g.op == GlobalOp::Multiply { "x" } else { "/" }, g.value, cat.tensors[g.tensor].name)
                }
                None => String::new(),
            };
            let zeros = p.zeros.map_or(String::new(), |z| format!(", zero points <- {}", cat.tensors[z].name));
            format!(
                "{} {} {} {:?} <- {}{global}{zeros} -> {} {}",
                p.encoding.name(),
                p.scheme.name(),
                s.layout.describe(),
                s.dtype,
                cat.tensors[s.tensor].name,
                p.name,
                human::shape(&p.shape)
            )
        }
        (Some(s), None, _) => format!("{} {:?} <- {}", s.layout.describe(), s.dtype, cat.tensors[s.tensor].name),
        (None, _, Role::Scale { weight }) => format!("scale of {}", cat.tensors[weight].name),
        (None, _, Role::InputScale) => "activation scale (not loaded)".into(),
        (None, _, Role::Data) => match t.encoding() {
            Err(_) => "unsupported".into(),
            Ok(weightstream::Encoding::Fp8(_)) => "unscaled".into(),
            Ok(_) => String::new(),
        },
    }
}

pub fn to_text(cat: &Catalog, all_metadata: bool) -> String {
    let mut out = String::new();
    let kind = match &cat.metadata {
        Metadata::Gguf { version, alignment, .. } if cat.files.len() > 1 => {
            format!("GGUF v{version} split set of {} files, alignment {alignment}", cat.files.len())
        }
        Metadata::Gguf { version, alignment, .. } => format!("GGUF v{version}, alignment {alignment}"),
        Metadata::Safetensors(_) => format!("safetensors, {} file(s)", cat.files.len()),
    };
    out += &format!(
        "{}\n  {kind}, {} tensors, {}\n",
        human::printable(&cat.root.display().to_string()),
        cat.tensors.len(),
        human::bytes(cat.file_bytes())
    );

    let meta: Vec<(String, String)> = match (&cat.format, &cat.metadata) {
        (Format::Gguf, _) => key_gguf_metadata(cat, all_metadata),
        (_, Metadata::Safetensors(m)) => m.iter().map(|(k, v)| (k.clone(), format!("{v:?}"))).collect(),
        _ => vec![],
    };
    if !meta.is_empty() {
        out += "\nmetadata\n";
        let mut t = Table::new(&["KEY", "VALUE"], &[false, false]);
        for (k, v) in meta {
            t.row(vec![format!("  {}", human::printable(&k)), human::printable(&v)]);
        }
        out += &t.render().lines().skip(1).map(|l| format!("{l}\n")).collect::<String>();
        if let Metadata::Gguf { kv, .. } = &cat.metadata {
            if !all_metadata {
                out += &format!("  ({} keys in all; --all-metadata lists them)\n", kv.len());
            }
        }
    }
    if let Some(q) = cat.config.as_ref().and_then(|c| c.get("quantization_config")) {
        out += &format!("\nconfig.json quantization_config: {q}\n");
    }

    out += "\n";
    let has_scale_col = cat.tensors.iter().any(|t| !scale_column(cat, t).is_empty());
    let mut header = vec!["NAME", "DTYPE", "SHAPE", "SIZE"];
    if has_scale_col {
        header.push("SCALE");
    }
    let mut table = Table::new(&header, &[false, false, false, true, false]);
    for t in &cat.tensors {
        let mut row = vec![human::printable(&t.name), t.dtype.name().to_string(), human::shape(&t.shape), human::bytes(t.nbytes)];
        if has_scale_col {
            row.push(scale_column(cat, t));
        }
        table.row(row);
    }
    out += &table.render();

    out += "\n";
    let mut tot = Table::new(&["DTYPE", "TENSORS", "ELEMENTS", "SIZE"], &[false, true, true, true]);
    let (mut n, mut e, mut b) = (0, 0, 0);
    for (d, (tn, te, tb)) in totals(cat) {
        tot.row(vec![d.to_string(), tn.to_string(), human::count(te), human::bytes(tb)]);
        n += tn;
        e += te;
        b += tb;
    }
    tot.row(vec!["total".into(), n.to_string(), human::count(e), human::bytes(b)]);
    out += &tot.render();
    let unsupported: Vec<&TensorInfo> = cat.tensors.iter().filter(|t| t.role == Role::Data && t.encoding().is_err()).collect();
    if !unsupported.is_empty() {
        out += &format!(
            "\n{} tensor(s) cannot be dequantized to BF16 ({}); loading them fails, convert --skip-unsupported leaves them out\n",
            unsupported.len(),
            unsupported
                .iter()
                .map(|t| t.dtype.name())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out
}
