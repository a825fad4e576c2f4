//! The CREDENCE pipeline after the decomposer: the verifier ([`verify`]) that checks a
//! claim list against its source sentence (atomicity, entity preservation, repetition,
//! plus the self-containment and modality diagnostics), the repairers that build on its
//! report ([`repair`]: the rule tier and the LLM tier), the modes that combine them
//! ([`modes`]), every per-example metric ([`scoring`]), and the passes of the
//! convergence audit ([`convergence`]).

pub mod convergence;
pub mod modes;
pub mod repair;
pub mod scoring;
pub mod verify;
