//! The store tests' run: model `m` on dataset `d` (content hash `h`) in modes base and
//! repair, recorded as the sweep `run`.

use credence_core::dataset::LoadedDataset;
use credence_core::domain::{Example, Mode};
use credence_core::job::{plan, Job, PlannedDataset, PlannedModel};

/// The recorded sweep, for the aggregation (B = 200).
pub fn spec_json() -> String {
    let toml = "[sweep]\nname = \"run\"\nmodes = [\"base\", \"repair\"]\n\
                [bootstrap]\nresamples = 200\n\
                [[models]]\nname = \"m\"\nbackend = \"sentence-split\"\n\
                [[datasets]]\nid = \"d\"\npath = \"d.jsonl\"\n";
    let spec = credence_core::sweep::parse(
        toml,
        std::path::Path::new("t.toml"),
        std::path::Path::new("."),
    )
    .expect("the test sweep is valid");
    serde_json::to_string(&spec).expect("a sweep serialises")
}

/// `n` examples `e0`, `e1`, ... with two references each.
pub fn dataset(n: usize) -> LoadedDataset {
    LoadedDataset {
        path: "d.jsonl".into(),
        hash: "h".into(),
        examples: (0..n)
            .map(|i| Example {
                id: format!("e{i}"),
                text: format!("Text {i} and more."),
                references: vec![format!("Text {i}."), "More.".into()],
                meta: Default::default(),
            })
            .collect(),
    }
}

/// The plan of `n` examples in shards of `shard`, both modes.
pub fn jobs(n: u32, shard: u32) -> Vec<Job> {
    let models = [PlannedModel {
        name: "m".into(),
        fingerprint: "f".into(),
    }];
    let ds = [PlannedDataset {
        id: "d".into(),
        hash: "h".into(),
        len: n,
    }];
    plan("run", &models, &ds, &[Mode::Base, Mode::Repair], shard, "c")
}
