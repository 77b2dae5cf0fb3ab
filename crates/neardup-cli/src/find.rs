//! The find-all / find-clusters job: fingerprints in, pairs or clusters out. Shared by
//! `neardup find-all|find-clusters` and the drop-in `simhash-find-all|simhash-find-clusters`.

use std::sync::Arc;

use neardup::batch::{self, planner, Distinct, Matcher};
use neardup::tables::{Layout, Levels};
use neardup_io::fingerprints::{read_decimal, Format, Source, U64File};

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
    /// Block count, two levels of them, or `auto`.
    pub blocks: Levels,
    /// Largest Hamming distance reported.
    pub distance: u32,
    /// Also report `[v,v]` for each fingerprint given more than once (pairs only).
    pub exact_duplicates: bool,
    /// How the input is written.
    pub format: Format,
    /// Bytes matching may hold (`None`: [`default_memory`]).
    pub memory: Option<u64>,
}

/// The memory budget when none is given: three quarters of the machine's RAM
/// ([`share_of_ram`]).
pub fn default_memory() -> u64 {
    share_of_ram(3, 4)
}

/// `parts / whole` of the machine's RAM (of 8 GB where that cannot be read).
pub fn share_of_ram(parts: u64, whole: u64) -> u64 {
    machine_memory().unwrap_or(8_000_000_000) / whole.max(1) * parts
}

/// The machine's RAM in bytes (`MemTotal`), if it can be read.
pub fn machine_memory() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    m.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

/// A size in bytes: a number with an optional K, M, G or T (powers of 1024), e.g. `16G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: f64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("expected a size such as 4G, 512M or 1000000, got '{s}'"))?;
    let bytes = n * (1u64 << shift) as f64;
    if !(1.0..1.8e19).contains(&bytes) {
        return Err(format!("a size of {s} bytes is out of range"));
    }
    Ok(bytes as u64)
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
fn check_layout(blocks: Levels, distance: u32) -> Result<(), Failure> {
    match blocks {
        Levels::One(m) => Layout::new(m, distance).map(drop),
        Levels::Two(a, b) => Layout::two_level(a, b, distance).map(drop),
        // The layout of distance + 1 blocks (the fewest tables) is valid when any is:
        // checked without pricing every layout.
        Levels::Auto => Layout::new(distance as usize + 1, distance).map(drop),
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
    // The values given more than once take a pass of their own over the sorted values
    // (about a millisecond at 1M): only when they are printed.
    let repeats_wanted = job == Job::Pairs && opts.exact_duplicates;
    let (set, repeats) = match opts.format.detect(&opts.input) {
        Format::U64 => {
            drop(source);
            // Sorted straight from the mapping into the distinct array: no copy of the
            // input, and the mapping goes before matching.
            let file = U64File::open(&opts.input)?;
            progress.phase("sorting", None);
            if repeats_wanted {
                Distinct::from_slice_with_repeats(file.values())
            } else {
                Distinct::from_slice(file.values()).map(|set| (set, Vec::new()))
            }
        }
        Format::Decimal | Format::Auto => {
            let fps = read_decimal(source, &*progress)?;
            progress.phase("sorting", None);
            if repeats_wanted {
                Distinct::from_vec_with_repeats(fps)
            } else {
                Distinct::from_vec(fps).map(|set| (set, Vec::new()))
            }
        }
    }
    .map_err(Failure::input)?;
    let budget = opts.memory.unwrap_or_else(default_memory);
    let plan = planner::plan_with_memory(set.len(), opts.distance, opts.blocks, budget)
        .map_err(|e| Failure::input(anyhow::anyhow!("{e} (--memory)")))?;
    let layout = batch::layout(plan.plan.layout, set.len(), opts.distance)
        .map_err(|e| Failure::input(anyhow::anyhow!("invalid --blocks/--distance: {e}")))?;
    progress.phase("matching", Some(layout.tables().len() as u64));
    let bar = progress.clone();
    let mut matcher = Matcher::new(layout).on_progress(move |p| bar.set(p.done));
    if plan.passes > 1 {
        matcher = matcher.with_pass_keys(plan.pass_keys);
    }
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
    /// Number of bit blocks to use (more than the distance, at most 64), two levels of
    /// them as BLOCKSxSUBBLOCKS (Manku's nested blocks, e.g. 4x4), or 'auto' (the
    /// planner's choice of either).
    #[arg(short, long, default_value = "auto")]
    pub blocks: Levels,
    /// Maximum bit distance of matches (0 to 63).
    #[arg(short, long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(0..=63))]
    pub distance: u32,
    /// How the input is written: decimal (one per line), u64 (raw little-endian, 8 bytes
    /// each), or auto (u64 for a '.u64' name or bytes no decimal text has).
    #[arg(long, default_value = "auto")]
    pub format: Format,
    /// Memory matching may hold, e.g. 16G [default: three quarters of the RAM]: tables that
    /// do not fit are scanned in passes, with the same output.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,
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
            format: self.format,
            memory: self.memory,
        }
    }
}
