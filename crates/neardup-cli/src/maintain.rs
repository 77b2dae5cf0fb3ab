//! Checking and repairing a store's data directory, of either model: the same file
//! format, the same checks (`neardup_store::check`, `neardup_store::repair`).

use anyhow::anyhow;
use serde_json::json;

use crate::failure::{note, Failure};
use crate::output::Output;

/// Which command is asking, for its messages.
#[derive(Clone, Copy, Debug)]
pub enum Model {
    /// `neardup index`: a fingerprint store.
    Fingerprints,
    /// `neardup documents`: a document store (`neardup serve`'s).
    Documents,
}

impl Model {
    fn command(self) -> &'static str {
        match self {
            Model::Fingerprints => "neardup index",
            Model::Documents => "neardup documents",
        }
    }

    /// The command line that does `what` to the store in `dir`.
    fn line(self, what: &str, dir: &str) -> String {
        match self {
            Model::Fingerprints => format!("neardup index {what} {dir}"),
            Model::Documents => format!("neardup documents {what} --data {dir}"),
        }
    }
}

/// A store that cannot be checked or repaired is the input's problem: exit 2.
fn damaged(e: neardup_store::StoreError) -> Failure {
    Failure::input(anyhow!("{e}"))
}

/// Checks the store in `dir` without writing it: one JSON line {"documents", "complete",
/// "problems", "logged"}; an input error when anything is wrong.
pub fn check(dir: &str, model: Model) -> Result<(), Failure> {
    let found = neardup_store::check(dir).map_err(damaged)?;
    let mut out = Output::create("-")?;
    let (batches, writes) = found.logged;
    let report = json!({
        "documents": found.documents,
        "complete": found.complete,
        "problems": found.problems,
        "logged": {"batches": batches, "writes": writes},
    });
    out.line(report.to_string().as_bytes())?;
    out.finish()?;
    let who = model.command();
    if batches > 0 {
        // `documents` counts the database's; these writes are acknowledged too.
        note(format_args!(
            "{who}: {dir}: {batches} batches of writes ({writes} writes) acknowledged since \
             the last checkpoint are in the write-ahead log, not yet in the database: the \
             next open applies them"
        ));
    }
    if found.problems.is_empty() {
        return Ok(());
    }
    let keeps = match (found.complete, model) {
        (true, _) => "keeps every document".to_string(),
        (false, Model::Fingerprints) => format!(
            "keeps what can be read; `{}` writes it out",
            model.line("export", dir)
        ),
        (false, Model::Documents) => "keeps what can be read".to_string(),
    };
    Err(Failure::input(anyhow!(
        "{dir}: the store is damaged ({} problems); `{}` {keeps}",
        found.problems.len(),
        model.line("repair", dir),
    )))
}

/// Repairs the store in `dir`: a new file with every readable document takes its place,
/// the damaged one kept beside it.
pub fn repair(dir: &str, model: Model) -> Result<(), Failure> {
    let done = neardup_store::repair(dir).map_err(damaged)?;
    let who = model.command();
    match &done.kept {
        None => note(format_args!(
            "{who}: {dir} is whole ({} documents): nothing to repair",
            done.documents
        )),
        Some(kept) => {
            for problem in &done.problems {
                note(format_args!("{who}: found: {problem}"));
            }
            note(format_args!(
                "{who}: repaired {dir}: {} documents kept{}; the damaged file is kept as {}",
                done.documents,
                if done.complete {
                    " (all of them)"
                } else {
                    ", others could not be read"
                },
                kept.display()
            ));
        }
    }
    Ok(())
}
