//! `weightstream convert`: a checkpoint to BF16 safetensors, or a Hugging
//! Face checkpoint to a BF16 GGUF for llama.cpp.

use std::path::PathBuf;

use serde_json::json;
use weightstream::{convert, Control, ConvertOptions, Staging};

use crate::human;
use crate::progress::Bar;
use crate::report::{CmdResult, OrFail};

#[derive(clap::Args)]
#[command(
    about = "Write a checkpoint as BF16 safetensors (GGUF or FP8 in, names kept), or as a BF16 GGUF for llama.cpp",
    long_about = "Dequantizes every tensor to BF16 and writes a safetensors checkpoint that the \
safetensors package and transformers load. Tensor names are kept; FP8 scales are consumed and \
activation scales (input_scale) dropped. OUT ending in .safetensors is one file; otherwise OUT is a \
directory of shards (model.safetensors, or model-0000i-of-0000N.safetensors with an index) with \
config.json (quantization_config removed) and tokenizer files copied. Memory stays bounded; output is \
written under a temporary name and renamed only when complete, so a failed or interrupted convert \
leaves nothing under OUT.\n\n\
With --to gguf (or OUT ending in .gguf) a Hugging Face checkpoint directory (Llama, Mistral, Qwen2, \
Qwen3, Qwen3-MoE; BF16, FP8, NVFP4 or INT4 safetensors) becomes the BF16 GGUF that llama.cpp's \
convert_hf_to_gguf.py --outtype bf16 writes: llama.cpp's metadata and tokenizer, its tensor names, \
llama's q/k row order, experts stacked; llama-quantize takes it from there. Config fields that \
disagree with the tensors, or that llama.cpp would abort on, are refused naming the file and field.",
    after_help = "Examples:\n  \
weightstream convert model-q4_0.gguf -o model-bf16.safetensors\n  \
weightstream convert ./Qwen3-8B-FP8 -o ./Qwen3-8B-BF16 --max-shard-size 2GB\n  \
weightstream convert model.gguf -o out/ --skip-unsupported --threads 4\n  \
weightstream convert ./Qwen3-8B-FP8 -o qwen3-8b-bf16.gguf && llama-quantize qwen3-8b-bf16.gguf q4_k_m.gguf Q4_K_M\n  \
AWS_ENDPOINT_URL=http://127.0.0.1:8333 weightstream convert s3://models/qwen3-q4_k_m.gguf -o q.safetensors\n\n\
Object storage: credentials and endpoint from the AWS environment (AWS_ACCESS_KEY_ID, \
AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL, AWS_PROFILE and ~/.aws); \
WEIGHTSTREAM_REMOTE_CONCURRENCY, _PART_SIZE, _RETRIES and _TIMEOUT tune the ranged GETs \
(docs/storage.md)."
)]
pub struct Args {
    /// A .gguf or .safetensors file, a checkpoint directory, or a URL: s3://bucket/key, s3://bucket/prefix/ (a directory of shards), the same with gs:// or az:// (abfs://, abfss://, https://ACCOUNT.blob.core.windows.net/container/...), http(s)://host/file
    pub input: PathBuf,
    /// Output: a .safetensors file, a directory, or a .gguf file
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format: safetensors (default), or gguf (llama.cpp; also chosen by OUT ending in .gguf)
    #[arg(long, value_parser = ["safetensors", "gguf"], default_value = "safetensors")]
    pub to: String,
    /// Largest shard in a directory output (5GB, 500MB, 2GiB, or bytes) [default: 5GB]
    #[arg(long, value_parser = parse_size)]
    pub max_shard_size: Option<u64>,
    /// Leave out tensors that cannot become BF16 (k-quants, integers) instead of failing
    #[arg(long)]
    pub skip_unsupported: bool,
    #[arg(long, default_value = "bf16", value_parser = crate::dtype_arg::parse, help = crate::dtype_arg::HELP)]
    pub dtype: crate::dtype_arg::OutDtype,
    /// Threads (default: every core)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Replace OUT if it exists
    #[arg(long)]
    pub force: bool,
    /// How to read the input: auto, read, mmap, direct or gds (see `weightstream load --help`)
    #[arg(long, default_value = "auto", value_parser = crate::source_arg::parse)]
    pub source: weightstream::SourceKind,
    /// Load a GGUF file whose metadata declares a transform of the weights
    /// (a Hadamard rotation, permutation, codebook) weightstream does not
    /// apply, ignoring it: the weights come out as stored, untransformed
    #[arg(long)]
    pub ignore_transform: bool,
    /// Print a JSON report
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cache: crate::cache_arg::CacheArg,
}

fn parse_size(s: &str) -> Result<u64, String> {
    human::parse_size(s).ok_or_else(|| format!("'{s}' is not a size like 5GB, 500MB, 2GiB or a byte count"))
}

pub fn run(args: &Args) -> CmdResult {
    crate::interrupt::install();
    let bar = Bar::new("convert", args.json);
    let update = |p| bar.update(p);
    let control = Control { progress: Some(&update), cancel: Some(crate::interrupt::flag()) };
    let opts = ConvertOptions {
        max_shard_bytes: args.max_shard_size,
        skip_unsupported: args.skip_unsupported,
        force: args.force,
        staging: Staging { threads: args.threads, ..Default::default() },
        source: args.source,
        open: weightstream::format::OpenOptions { ignore_transforms: args.ignore_transform },
        to_gguf: args.to == "gguf",
        out: args.dtype,
        cache: args.cache.cache.clone(),
        cancel: Some(crate::interrupt::shared()),
    };
    let report = convert(&args.input, &args.output, &opts, control);
    bar.finish();
    let r = report.or_fail(args.json)?;
    let s = r.stats;
    if args.json {
        let out = json!({
            "output": r.output.display().to_string(),
            "files": r.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
            "tensors": s.tensors, "src_bytes": s.src_bytes, "out_bytes": s.out_bytes, "seconds": s.seconds,
            "skipped": r.skipped.iter().map(|k| json!({"name": k.name, "reason": k.reason})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out).expect("JSON of owned values"));
    } else {
        println!(
            "wrote {} ({} tensors, {} BF16 in {} file(s)) in {:.2} s",
            r.output.display(),
            s.tensors,
            human::bytes(s.out_bytes),
            r.files.len(),
            s.seconds
        );
        for k in &r.skipped {
            println!("  skipped {}: {}", k.name, k.reason);
        }
    }
    Ok(())
}
