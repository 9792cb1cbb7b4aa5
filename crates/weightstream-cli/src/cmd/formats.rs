//! `weightstream formats`: what each supported encoding is, from the one
//! definition of each block format (what the kernels use), for people and
//! for scripts (the GPU round's sweep builds its inputs from `--json`).

use serde_json::json;
use weightstream::format::{supported_encodings, BlockFormat};
use weightstream::kernels::{Launch, OutDtype};

use crate::human::Table;
use crate::report::CmdResult;

#[derive(clap::Args)]
#[command(
    about = "List the formats weightstream dequantizes, with each block format's layout",
    after_help = "Examples:\n  \
weightstream formats               block formats: elements, bytes, fields and their offsets\n  \
weightstream formats --json        the same for scripts"
)]
pub struct Args {
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> CmdResult {
    if args.json {
        let blocks: Vec<_> = BlockFormat::ALL
            .iter()
            .map(|f| {
                let l = f.layout();
                json!({
                    "name": l.name,
                    "ggml_id": l.ggml_id,
                    "elements": l.elems,
                    "bytes": l.bytes,
                    "fields": l.fields.iter().map(|x| json!({"name": x.name.to_ascii_lowercase(), "offset": x.offset, "bytes": l.field(x.name).map(|(a, b)| b - a)})).collect::<Vec<_>>(),
                    // The kernel source (one fatbin) that holds its kernel.
                    "cuda_module": Launch::Block(*f, OutDtype::BF16).function().0,
                    "cuda_function": l.cuda_function,
                })
            })
            .collect();
        // Every CUDA kernel the executor launches, the source (fatbin) that
        // defines it and its u64 arguments in order (Launch::args).
        let kernels: Vec<_> = Launch::every()
            .map(|k| {
                let (module, function) = k.function();
                let args: Vec<&str> = k.args(0, 0, 0).into_iter().map(|(name, _)| name).collect();
                json!({"function": function, "module": module, "args": args})
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"supported": supported_encodings().split(", ").collect::<Vec<_>>(), "block_formats": blocks, "kernels": kernels})
            )
            .expect("JSON of owned values")
        );
        return Ok(());
    }
    println!("supported: {}\n", supported_encodings());
    let mut t =
        Table::new(&["BLOCK FORMAT", "ELEMENTS", "BYTES", "BITS/WEIGHT", "FIELDS (byte offset)"], &[false, true, true, true, false]);
    for f in BlockFormat::ALL {
        let l = f.layout();
        let fields = l.fields.iter().map(|x| format!("{} @{}", x.name.to_ascii_lowercase(), x.offset)).collect::<Vec<_>>().join(", ");
        t.row(vec![
            l.name.into(),
            l.elems.to_string(),
            l.bytes.to_string(),
            format!("{:.4}", l.bytes as f64 * 8.0 / l.elems as f64),
            fields,
        ]);
    }
    print!("{}", t.render());
    println!("\nThe value formulas are in docs/numerics.md; docs/formats.md lists every type.");
    Ok(())
}
