//! Which device a load runs on: `auto`, `cpu`, `cuda` or `cuda:N`.

use std::fmt;
use std::str::FromStr;

use weightstream_cuda::CudaError;

use crate::error::{Error, Result};

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// GPU 0 if there is a usable one, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
}

/// Where the work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| Error::InvalidArgument(format!("device '{s}': use auto, cpu, cuda or cuda:N"))),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// CUDA devices this process can use, or why there are none.
pub fn cuda_device_count() -> Result<usize> {
    Ok(weightstream_cuda::device_count()?)
}

impl DeviceChoice {
    /// Decide. `auto` never fails; an explicit `cuda` fails with the reason
    /// there is no usable GPU (no kernels in this build, no driver, no device).
    pub fn resolve(self) -> Result<Device> {
        match self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Auto => Ok(if weightstream_cuda::gpu_present() { Device::Cuda(0) } else { Device::Cpu }),
            DeviceChoice::Cuda(n) => {
                let count = weightstream_cuda::device_count()?;
                if n >= count {
                    return Err(Error::Device(CudaError::Unavailable(format!("cuda:{n} does not exist: {count} device(s)"))));
                }
                Ok(Device::Cuda(n))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!("auto".parse::<DeviceChoice>().unwrap(), DeviceChoice::Auto);
        assert_eq!("cuda".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda(0));
        assert_eq!("cuda:3".parse::<DeviceChoice>().unwrap(), DeviceChoice::Cuda(3));
        assert!("gpu".parse::<DeviceChoice>().is_err());
        assert!("cuda:x".parse::<DeviceChoice>().is_err());
    }
}
