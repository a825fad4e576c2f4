//! Where a local model or encoder runs, and the dtype of a safetensors model's weights:
//! parsed once, where a sweep file or a command line names them, instead of as strings
//! that each user matched.

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

/// The dtype a safetensors model's weights and activations run in (GGUF weights stay as
/// quantised). Its JSON is its name, so a stored sweep reads as it always did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// 32-bit float (a CPU's default).
    F32,
    /// bfloat16 (a CUDA GPU's default).
    Bf16,
    /// IEEE half.
    F16,
}

impl WeightDtype {
    /// Every dtype, in the order error messages list them.
    pub const ALL: [WeightDtype; 3] = [WeightDtype::F32, WeightDtype::Bf16, WeightDtype::F16];

    /// Its name in a sweep file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WeightDtype::F32 => "f32",
            WeightDtype::Bf16 => "bf16",
            WeightDtype::F16 => "f16",
        }
    }

    /// The dtype a model on `device` runs in when its sweep names none: bf16 on a GPU
    /// (the paper's), f32 on a CPU.
    pub fn default_on(device: ComputeDevice) -> WeightDtype {
        if device.is_cuda() {
            WeightDtype::Bf16
        } else {
            WeightDtype::F32
        }
    }
}

/// A dtype name that is none of `f32`, `bf16`, `f16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDtype(pub String);

impl fmt::Display for UnknownDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown dtype {:?}; expected f32, bf16, f16", self.0)
    }
}

impl std::error::Error for UnknownDtype {}

impl FromStr for WeightDtype {
    type Err = UnknownDtype;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WeightDtype::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDtype(s.to_string()))
    }
}

impl fmt::Display for WeightDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

    #[test]
    fn dtypes_parse_print_and_serialise_as_their_names() {
        for d in WeightDtype::ALL {
            assert_eq!(d.name().parse::<WeightDtype>(), Ok(d));
            assert_eq!(d.to_string(), d.name());
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.name()));
            assert_eq!(serde_json::from_str::<WeightDtype>(&json).unwrap(), d);
        }
        for bad in ["F32", "bfloat16", "fp16", "q4_k", ""] {
            assert_eq!(
                bad.parse::<WeightDtype>().unwrap_err().to_string(),
                format!("unknown dtype {bad:?}; expected f32, bf16, f16")
            );
        }
        assert!(serde_json::from_str::<WeightDtype>("\"int8\"").is_err());
        assert_eq!(
            WeightDtype::default_on(ComputeDevice::Cpu),
            WeightDtype::F32
        );
        assert_eq!(
            WeightDtype::default_on(ComputeDevice::Cuda(Some(1))),
            WeightDtype::Bf16
        );
    }
}
