//! Getting a job's bytes and scales out of its source: shared by every
//! executor. Zero-copy where the source maps the file, a positioned read
//! otherwise.

use std::borrow::Cow;
use std::ops::Range;

use weightstream_dequant::{fold_global, scales_to_f32, unpack_zeros, Kernel, ScaleGrid};
use weightstream_format::{Catalog, Encoding, ScaleDtype};

use crate::alloc::zeroed;
use crate::error::{Error, Result};
use crate::plan::{file_path, Job};

/// Bytes `range` of file `file`, read on behalf of `tensor` (for errors).
pub fn bytes<'c>(cat: &'c Catalog, file: usize, range: Range<u64>, tensor: &str) -> Result<Cow<'c, [u8]>> {
    let src = &cat.files[file].source;
    if let Some(s) = src.slice(range.clone()) {
        return Ok(Cow::Borrowed(s));
    }
    let len = range.end - range.start;
    let mut buf = usize::try_from(len).ok().and_then(zeroed).ok_or_else(|| Error::HostMemory { tensor: tensor.to_string(), bytes: len })?;
    read_into(cat, file, range.start, &mut buf, tensor)?;
    Ok(Cow::Owned(buf))
}

/// Fill `buf` from `offset` of file `file`.
pub fn read_into(cat: &Catalog, file: usize, offset: u64, buf: &mut [u8], tensor: &str) -> Result<()> {
    cat.files[file].source.read_at(offset, buf).map_err(|source| Error::Read {
        file: file_path(cat, file),
        tensor: tensor.to_string(),
        offset,
        source,
    })
}

/// A job with its scales decoded: hands out the kernel for any chunk.
pub struct JobKernel<'j> {
    job: &'j Job,
    /// The job's file, named by the errors of its chunks.
    file: &'j std::path::Path,
    scales: Option<Vec<f32>>,
    /// Zero points of an asymmetric integer pack, as exact f32, laid out
    /// like the scales.
    zeros: Option<Vec<f32>>,
}

impl<'j> JobKernel<'j> {
    pub fn new(cat: &'j Catalog, job: &'j Job) -> Result<Self> {
        let scales = match &job.scale {
            None => None,
            Some(s) => {
                let range = job.scale_range().unwrap_or_else(|| s.bytes.clone());
                let raw = bytes(cat, s.file, range.clone(), &cat.tensors[s.tensor].name)?;
                if s.scale.dtype == ScaleDtype::Exp2U8 {
                    if let Some(k) = raw.iter().position(|&e| e == 0xFF) {
                        // NaN in the OCP MX spec, and the producers' decoders
                        // disagree on it (compressed-tensors: 2^128 = inf;
                        // transformers' ldexp: finite for |x| < 1): no answer
                        // would be the reference's.
                        return Err(Error::BadScale {
                            file: file_path(cat, s.file),
                            tensor: job.name.clone(),
                            offset: range.start + k as u64,
                            reason: format!(
                                "group scale {k} of '{}' is exponent 255 (NaN in OCP MX; its producers decode it differently)",
                                cat.tensors[s.tensor].name
                            ),
                        });
                    }
                }
                if s.scale.dtype == ScaleDtype::E4M3 {
                    if let Some(k) = raw.iter().position(|&b| b & 0x80 != 0) {
                        // NVFP4's group scales are positive (the producers
                        // take amax / 6); MixFP4 checkpoints use the sign
                        // bit as a selector between element formats, which
                        // no NVFP4 decoder reads: decoding it as a sign
                        // would give negated, wrong weights.
                        return Err(Error::BadScale {
                            file: file_path(cat, s.file),
                            tensor: job.name.clone(),
                            offset: range.start + k as u64,
                            reason: format!(
                                "group scale {k} of '{}' is negative (byte {:#04x}): NVFP4 scales are positive; \
                                 a sign bit set there is another format's selector (MixFP4), which weightstream does not read",
                                cat.tensors[s.tensor].name, raw[k]
                            ),
                        });
                    }
                }
                let read = scales_to_f32(s.scale.dtype, &raw).ok_or_else(|| Error::BadScale {
                    file: file_path(cat, s.file),
                    tensor: job.name.clone(),
                    offset: range.start,
                    reason: format!("not a whole number of {:?} values", s.scale.dtype),
                })?;
                let mut values = match s.row_bytes {
                    // Only this job's grid rows were read: placed where the
                    // kernels look them up in the whole grid, which stays
                    // zero elsewhere (rows this job never scales).
                    Some(row_bytes) if range != s.bytes => {
                        let l = &s.scale.layout;
                        let at = ((range.start - s.bytes.start) / row_bytes * l.grid_cols) as usize;
                        let mut all = vec![0f32; (l.grid_rows * l.grid_cols) as usize];
                        let rows = all.get_mut(at..at + read.len()).ok_or_else(|| Error::BadScale {
                            file: file_path(cat, s.file),
                            tensor: job.name.clone(),
                            offset: range.start,
                            reason: format!("scale rows {range:?} fall outside its {}x{} grid", l.grid_rows, l.grid_cols),
                        })?;
                        rows.copy_from_slice(&read);
                        all
                    }
                    _ => read,
                };
                if let Some(g) = s.global {
                    fold_global(&mut values, g.value, g.op);
                }
                Some(values)
            }
        };
        let zeros = match (job.encoding, cat.tensors[job.tensor].packed.as_ref().and_then(|p| p.zeros), &job.scale) {
            (Encoding::Int { bits }, Some(z), Some(s)) => {
                let zt = &cat.tensors[z];
                let raw = bytes(cat, zt.file, zt.offset..zt.offset + zt.nbytes, &zt.name)?;
                Some(unpack_zeros(&raw, bits, job.matrix.0, s.scale.layout.grid_cols))
            }
            _ => None,
        };
        Ok(JobKernel { job, file: &cat.files[job.file].path, scales, zeros })
    }

    /// Zero points as f32 (asymmetric integer packs).
    pub fn zeros(&self) -> Option<&[f32]> {
        self.zeros.as_deref()
    }

    /// The kernel's refusal of a chunk whose bytes start at `offset`.
    pub fn dequant_error(&self, offset: u64, source: weightstream_dequant::DequantError) -> Error {
        Error::Dequant { file: self.file.to_path_buf(), tensor: self.job.name.clone(), offset, source }
    }

    pub fn job(&self) -> &Job {
        self.job
    }

    /// Scales as f32 (FP8 jobs with a scale tensor; packed 4-bit jobs, the
    /// global scale folded in).
    pub fn scales(&self) -> Option<&[f32]> {
        self.scales.as_deref()
    }

    pub fn kernel(&self) -> Result<Kernel<'_>> {
        let job = self.job;
        let wrap = |source| self.dequant_error(job.src.start, source);
        let unscaled = |what: &str| Error::BadScale {
            file: self.file.to_path_buf(),
            tensor: job.name.clone(),
            offset: job.src.start,
            reason: format!("{what} without its scales"),
        };
        Ok(match job.encoding {
            Encoding::Fp8(format) => {
                let (rows, cols) = job.matrix;
                let scales = match (&job.scale, &self.scales) {
                    (Some(s), Some(v)) => Some(ScaleGrid::new(v, &s.scale.layout, rows, cols).map_err(wrap)?),
                    _ => None,
                };
                Kernel::Fp8 { format, rows, cols, scales }
            }
            Encoding::E2m1 => {
                let (rows, cols) = job.matrix;
                let (Some(s), Some(v)) = (&job.scale, &self.scales) else {
                    return Err(unscaled("a packed 4-bit weight"));
                };
                Kernel::E2m1 { rows, cols, scales: ScaleGrid::new(v, &s.scale.layout, rows, cols).map_err(wrap)? }
            }
            Encoding::Int { bits } => {
                let (rows, cols) = job.matrix;
                let (Some(s), Some(v)) = (&job.scale, &self.scales) else {
                    return Err(unscaled("an integer pack"));
                };
                let layout = &s.scale.layout;
                let zeros = match &self.zeros {
                    Some(z) => Some(ScaleGrid::new(z, layout, rows, cols).map_err(wrap)?),
                    None => None,
                };
                let scales = ScaleGrid::new(v, layout, rows, cols).map_err(wrap)?;
                Kernel::Int { bits, rows, cols, scales, zeros, round_f16: s.scale.dtype == ScaleDtype::F16 }
            }
            e => Kernel::for_encoding(e).expect("every encoding without scales has a kernel"),
        })
    }
}
