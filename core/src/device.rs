//! Where a local model or encoder runs: parsed once, where a sweep file or a command line
//! names it, instead of as a string that each user matched by prefix.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A compute device: the CPU, or a CUDA GPU (the first, or the one numbered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ComputeDevice {
    /// The CPU.
    #[default]
    Cpu,
    /// A CUDA GPU: `None` is `cuda` (the first), `Some(n)` is `cuda:n`.
    Cuda(Option<usize>),
}

impl ComputeDevice {
    /// Whether it is a CUDA GPU.
    pub fn is_cuda(self) -> bool {
        matches!(self, ComputeDevice::Cuda(_))
    }

    /// The CUDA ordinal (0 for plain `cuda`), `None` on the CPU.
    pub fn cuda_ordinal(self) -> Option<usize> {
        match self {
            ComputeDevice::Cpu => None,
            ComputeDevice::Cuda(n) => Some(n.unwrap_or(0)),
        }
    }
}

/// A device name that is none of `cpu`, `cuda`, `cuda:N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDevice(pub String);

impl fmt::Display for UnknownDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown device {:?}; expected cpu, cuda or cuda:N",
            self.0
        )
    }
}

impl std::error::Error for UnknownDevice {}

impl FromStr for ComputeDevice {
    type Err = UnknownDevice;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cpu" => Ok(ComputeDevice::Cpu),
            "cuda" => Ok(ComputeDevice::Cuda(None)),
            other => other
                .strip_prefix("cuda:")
                .and_then(|n| n.parse::<u32>().ok())
                .map(|n| ComputeDevice::Cuda(Some(n as usize)))
                .ok_or_else(|| UnknownDevice(s.to_string())),
        }
    }
}

impl fmt::Display for ComputeDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComputeDevice::Cpu => f.write_str("cpu"),
            ComputeDevice::Cuda(None) => f.write_str("cuda"),
            ComputeDevice::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

// As its name, so a stored sweep's JSON reads as it always did.
impl Serialize for ComputeDevice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeDevice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_print_back() {
        for (name, device) in [
            ("cpu", ComputeDevice::Cpu),
            ("cuda", ComputeDevice::Cuda(None)),
            ("cuda:0", ComputeDevice::Cuda(Some(0))),
            ("cuda:3", ComputeDevice::Cuda(Some(3))),
        ] {
            assert_eq!(name.parse::<ComputeDevice>(), Ok(device));
            assert_eq!(device.to_string(), name);
            let json = serde_json::to_string(&device).unwrap();
            assert_eq!(json, format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<ComputeDevice>(&json).unwrap(),
                device
            );
        }
        assert_eq!(ComputeDevice::Cuda(None).cuda_ordinal(), Some(0));
        assert_eq!(ComputeDevice::Cuda(Some(2)).cuda_ordinal(), Some(2));
        assert_eq!(ComputeDevice::Cpu.cuda_ordinal(), None);
        assert!(ComputeDevice::Cuda(None).is_cuda() && !ComputeDevice::Cpu.is_cuda());
    }

    #[test]
    fn other_names_are_refused_with_what_is_expected() {
        for bad in ["gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cpu:0", ""] {
            let e = bad.parse::<ComputeDevice>().unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("unknown device {bad:?}; expected cpu, cuda or cuda:N")
            );
        }
        assert!(serde_json::from_str::<ComputeDevice>("\"tpu\"").is_err());
    }
}
