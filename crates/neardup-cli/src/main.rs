//! `neardup`: near-duplicate detection with simhash. The commands and their flags; each
//! runs in `neardup_cli` (see its crate docs for which library does the work).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use neardup_cli::bench::{self, FindAllBench, FingerprintBench, IndexBench};
use neardup_cli::dedup::{self, DedupCmd};
use neardup_cli::documents::{self, DocumentsCmd};
use neardup_cli::eval::{self, EvalCmd};
use neardup_cli::failure;
use neardup_cli::find::{self, DropInArgs, Job, Voice};
use neardup_cli::fingerprint::{self, FingerprintCmd, IdfCmd};
use neardup_cli::index::{self, IndexCmd};
use neardup_cli::load::{self, LoadCmd};
use neardup_cli::serve::{self, ServeCmd};
use neardup_cli::{gen_docs, scale};

// Huge pages for the batch jobs' large buffers (memory.rs); declared here, in the
// binary, so that no library linked into another program chooses its allocator.
#[global_allocator]
static ALLOCATOR: neardup_cli::memory::Allocator = neardup_cli::memory::Allocator;

/// Near-duplicate detection with 64-bit simhash fingerprints.
#[derive(Parser)]
#[command(name = "neardup", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Near-duplicate documents: clusters, pairs, and the corpus without its copies.
    ///
    /// Reads JSON Lines (--text-field, --id-field), text files (one document each, or one
    /// per line with --lines), directories, .gz/.zst files, or standard input. Writes any
    /// of --clusters, --pairs, --deduplicated, and a summary on standard error.
    Dedup(DedupCmd),
    /// Every pair of fingerprints within --distance bits: one [a,b] per line, a < b.
    ///
    /// Input: one decimal u64 per line (blank lines skipped). Each pair of distinct values
    /// is printed once; values given more than once are one value (see
    /// --exact-duplicates).
    FindAll {
        #[command(flatten)]
        find: DropInArgs,
        /// Also print [v,v] for every value given more than once.
        #[arg(long)]
        exact_duplicates: bool,
    },
    /// Clusters of fingerprints (connected components of the pairs within --distance
    /// bits): one [a,b,c,...] per line, values increasing, unmatched values not printed.
    FindClusters {
        #[command(flatten)]
        find: DropInArgs,
    },
    /// Fingerprints of documents: one JSON line {"id", "fingerprint"} per document, in
    /// input order.
    ///
    /// Reads JSON Lines, text files (one document each, or one per line with --lines),
    /// directories, .gz/.zst files, or standard input.
    Fingerprint(FingerprintCmd),
    /// The idf table of a corpus, for --weighting tfidf.
    Idf(IdfCmd),
    /// A durable store of simhash fingerprints in a data directory, matched within a
    /// Hamming distance: create, insert, remove, query, sweep, stats, check, repair, export.
    #[command(subcommand)]
    Index(IndexCmd),
    /// The document model offline: texts matched by estimated Jaccard similarity, as
    /// `neardup serve` decides, in its data directory (--data) or a Redis Cluster
    /// (--redis): create, insert, remove, query, sweep, stats.
    #[command(subcommand)]
    Documents(DocumentsCmd),
    /// The HTTP service: near-duplicate checks of documents and paragraphs over a durable
    /// store, with the decision of `neardup dedup`.
    ///
    /// Serves the store in --data (made first with --create) on --listen until SIGTERM or
    /// SIGINT; then finishes the requests in flight and their writes. API: PUT/GET/DELETE
    /// /v1/documents/{id}, POST /v1/check, POST /v1/bulk/documents, POST /v1/bulk/check,
    /// GET /healthz, /metrics, /v1/openapi.json.
    Serve(ServeCmd),
    /// Loads documents into the store of `neardup serve` offline, deciding each as a put
    /// to the service would (--only-if-unique: its "only_if_unique").
    ///
    /// Reads what `neardup dedup` reads (JSON Lines, text, Parquet, directories, .gz/.zst,
    /// standard input), signs on every core, and commits a batch at a time, durably.
    /// Prints a summary line of JSON; --outcomes writes each document's outcome.
    Load(LoadCmd),
    /// Measures precision and recall of fingerprint settings on edited copies of real
    /// documents, at k = 0 to --max-k.
    Eval(EvalCmd),
    /// Benchmarks, printing one JSON line per run with the peers' keys.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Batch all-pairs on a fingerprint file or a generated workload.
    FindAll(FindAllBench),
    /// Fingerprinting throughput on a corpus, one thread and all threads.
    Fingerprint(FingerprintBench),
    /// The online corpus: build from an index file, then find_all every query.
    Index(IndexBench),
    /// Writes N random fingerprints with planted near copies, raw u64, from a seed (the
    /// billion-fingerprint workload of docs/benchmarks.md).
    GenFingerprints(scale::GenFingerprints),
    /// Checks what find-all wrote: every planted pair found, a random sample brute-forced
    /// against the whole input.
    CheckPairs(scale::CheckPairs),
    /// Writes N documents with planted near-duplicates and their exact Jaccard, from a
    /// seed, into zstd shards (the 100M dedup and service runs).
    GenDocs(gen_docs::GenDocs),
}

fn main() -> ExitCode {
    let cli: Cli = match failure::parse("neardup") {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    if !matches!(cli.command, Command::Serve(_)) {
        neardup_cli::memory::keep_freed_memory();
    }
    failure::exit("neardup", || match cli.command {
        Command::FindAll {
            find,
            exact_duplicates,
        } => {
            let mut options = find.options();
            options.exact_duplicates = exact_duplicates;
            find::run(Job::Pairs, &options, Voice::Neardup)
        }
        Command::FindClusters { find } => find::run(Job::Clusters, &find.options(), Voice::Neardup),
        Command::Dedup(cmd) => dedup::run(&cmd),
        Command::Fingerprint(cmd) => fingerprint::run(&cmd),
        Command::Idf(cmd) => fingerprint::idf(&cmd),
        Command::Index(cmd) => index::run(&cmd),
        Command::Documents(cmd) => documents::run(&cmd),
        Command::Eval(cmd) => eval::run(&cmd),
        Command::Serve(cmd) => serve::run(&cmd),
        Command::Load(cmd) => load::run(&cmd),
        Command::Bench(BenchCommand::FindAll(args)) => bench::find_all(&args),
        Command::Bench(BenchCommand::Fingerprint(args)) => bench::fingerprint(&args),
        Command::Bench(BenchCommand::Index(args)) => bench::index(&args),
        Command::Bench(BenchCommand::GenFingerprints(args)) => scale::gen_fingerprints(&args),
        Command::Bench(BenchCommand::CheckPairs(args)) => scale::check_pairs(&args),
        Command::Bench(BenchCommand::GenDocs(args)) => gen_docs::gen_docs(&args),
    })
}
