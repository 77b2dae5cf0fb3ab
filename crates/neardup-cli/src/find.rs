//! The find-all / find-clusters job: fingerprints in, pairs or clusters out. Shared by
//! `neardup find-all|find-clusters` and the drop-in `simhash-find-all|simhash-find-clusters`.

use std::sync::Arc;

use neardup::batch::{self, Distinct, Matcher};
use neardup::tables::{Blocks, Layout};
use neardup_io::fingerprints::{read_decimal, Source};

use crate::failure::Failure;
use crate::output::{refuse_overwrite, Output};
use crate::progress::Progress;

/// What to find.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// Every pair within the distance.
    Pairs,
    /// Connected components of the match graph.
    Clusters,
}

/// The job's settings, as given on the command line.
#[derive(Clone, Debug)]
pub struct Options {
    /// Input path, `-` for standard input.
    pub input: String,
    /// Output path, `-` for standard output.
    pub output: String,
    /// Block count, or `auto`.
    pub blocks: Blocks,
    /// Largest Hamming distance reported.
    pub distance: u32,
    /// Also report `[v,v]` for each fingerprint given more than once (pairs only).
    pub exact_duplicates: bool,
}

/// How the job talks: neardup's own commands, or the simhash-cpp binaries they replace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Voice {
    /// A progress bar on a terminal, no chatter.
    Neardup,
    /// simhash-cpp's messages on standard error, no progress bar.
    SimhashCpp,
}

/// Checks the layout settings before any input is read.
fn check_layout(blocks: Blocks, distance: u32) -> Result<(), Failure> {
    match blocks {
        Blocks::Fixed(m) => Layout::new(m, distance).map(drop),
        // The layout of distance + 1 blocks (the fewest tables) is valid when any is:
        // checked without pricing every layout.
        Blocks::Auto => Layout::new(distance as usize + 1, distance).map(drop),
    }
    .map_err(|e| Failure::input(anyhow::anyhow!("invalid --blocks/--distance: {e}")))
}

/// Runs the job.
pub fn run(job: Job, opts: &Options, voice: Voice) -> Result<(), Failure> {
    check_layout(opts.blocks, opts.distance)?;
    refuse_overwrite(&[("output", &opts.output)], &[("the input", &opts.input)])?;
    let source = Source::open(&opts.input)?;
    let mut out = Output::create(&opts.output)?;
    let chatty = voice == Voice::SimhashCpp;
    let progress = Arc::new(match voice {
        Voice::Neardup => Progress::for_stderr(),
        Voice::SimhashCpp => Progress::hidden(),
    });
    if chatty {
        match opts.input.as_str() {
            "-" => crate::note!("Reading hashes from stdin."),
            path => crate::note!("Reading hashes from {path}"),
        }
    }
    let fps = read_decimal(source, &*progress)?;
    let layout = batch::layout(opts.blocks, fps.len(), opts.distance)
        .map_err(|e| Failure::input(anyhow::anyhow!("invalid --blocks/--distance: {e}")))?;
    progress.phase("sorting", None);
    // The values given more than once take a pass of their own over the sorted values
    // (about a millisecond at 1M): only when they are printed.
    let (set, repeats) = if job == Job::Pairs && opts.exact_duplicates {
        Distinct::from_vec_with_repeats(fps)
    } else {
        Distinct::from_vec(fps).map(|set| (set, Vec::new()))
    }
    .map_err(Failure::input)?;
    progress.phase("matching", Some(layout.tables().len() as u64));
    let bar = progress.clone();
    let matcher = Matcher::new(layout).on_progress(move |p| bar.set(p.done));
    if chatty {
        crate::note!(
            "{}",
            match job {
                Job::Pairs => "Computing matches...",
                Job::Clusters => "Computing clusters...",
            }
        );
        match (opts.output.as_str(), job) {
            ("-", _) => crate::note!("Writing results to stdout."),
            (path, Job::Pairs) => crate::note!("Writing matches to {path}"),
            (path, Job::Clusters) => crate::note!("Writing results to {path}"),
        }
    }
    match job {
        Job::Pairs => {
            if opts.exact_duplicates {
                for &v in &repeats {
                    out.array(&[v, v])?;
                }
            }
            matcher
                .find_all(&set, |a, b| {
                    out.array(&[a, b])?;
                    // Nobody reads any more: stop matching.
                    if out.is_closed() {
                        return Err(None);
                    }
                    Ok(())
                })
                .or_else(|e: Option<Failure>| e.map_or(Ok(()), Err))?;
        }
        Job::Clusters => {
            for cluster in matcher.clusters(&set) {
                out.array(&cluster)?;
                if out.is_closed() {
                    break;
                }
            }
        }
    }
    progress.finish();
    out.finish()
}

/// The flags of simhash-cpp's binaries (`--input/-i`, `--output/-o`, `--blocks/-b`,
/// `--distance/-d`), shared by neardup's own `find-all` / `find-clusters`.
#[derive(clap::Args, Clone, Debug)]
pub struct DropInArgs {
    /// Path to input ('-' for stdin): one decimal u64 per line; blank lines are skipped.
    #[arg(short, long, default_value = "-")]
    pub input: String,
    /// Path to output ('-' for stdout): one JSON array per line.
    #[arg(short, long, default_value = "-")]
    pub output: String,
    /// Number of bit blocks to use (more than the distance, at most 64), or 'auto'.
    #[arg(short, long, default_value = "auto")]
    pub blocks: Blocks,
    /// Maximum bit distance of matches (0 to 63).
    #[arg(short, long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub distance: u32,
}

impl DropInArgs {
    /// The job's options.
    pub fn options(&self) -> Options {
        Options {
            input: self.input.clone(),
            output: self.output.clone(),
            blocks: self.blocks,
            distance: self.distance,
            exact_duplicates: false,
        }
    }
}
