//! `neardup eval --report FILE`: the evaluation's tables as a page, with precision and
//! recall plotted: against the threshold for `eval --truth` (how `neardup dedup` does on
//! a corpus whose near-duplicate pairs are known), against the distance k for the
//! fingerprint settings of plain `eval`.

use serde::Serialize;
use serde_json::Value;

use super::page::{self, grouped, Figure};
use super::plot::{fmt4, LineChart, Series};
use crate::Error;

/// Configurations plotted for plain `eval`: the best by F1.
const PLOTTED: usize = 5;

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or(0.0)
}

fn class(i: usize) -> String {
    format!("s{}", i % 6)
}

/// The lowest tick of a share axis showing `values`: 0, or the tenth below the lowest
/// value when every value is high (0.97 → 0.9), so that differences near 1 show.
fn share_floor(values: impl Iterator<Item = f64>) -> f64 {
    let lowest = values.fold(1.0f64, f64::min);
    ((lowest * 10.0 - 1e-9).floor() / 10.0).clamp(0.0, 0.9)
}

/// The x range of a chart over `xs`, a little wider than a single point.
fn x_range(xs: &[f64]) -> (f64, f64) {
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    match (lo.is_finite(), hi > lo) {
        (true, true) => (lo, hi),
        (true, false) => (lo - 0.05, lo + 0.05),
        _ => (0.0, 1.0),
    }
}

/// A row of a results table: cells as shown, with the key each comes from.
#[derive(Serialize)]
struct Cell {
    key: String,
    shown: String,
}

#[derive(Serialize)]
struct TableView {
    id: String,
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

#[derive(Serialize)]
struct Page {
    version: &'static str,
    title: String,
    inputs: Vec<String>,
    lead: String,
    figures: Vec<Figure>,
    charts: Vec<LineChart>,
    tables: Vec<TableView>,
    notes: Vec<String>,
}

fn cell(key: &str, shown: String) -> Cell {
    Cell {
        key: key.into(),
        shown,
    }
}

fn percent(share: f64) -> String {
    format!("{:.2}%", 100.0 * share)
}

/// The page of `eval --truth`: `rows` are its JSON lines, one per threshold.
pub fn truth_page(
    rows: &[Value],
    documents: usize,
    inputs: &[String],
    truth: &str,
) -> Result<String, Error> {
    let mut rows: Vec<&Value> = rows.iter().collect();
    rows.sort_by(|a, b| num(a, "threshold").total_cmp(&num(b, "threshold")));
    let xs: Vec<f64> = rows.iter().map(|r| num(r, "threshold")).collect();
    let (x_min, x_max) = x_range(&xs);
    let series = |name: &str, i: usize, key: &str| -> Series {
        (
            name.into(),
            class(i),
            rows.iter()
                .map(|r| (num(r, "threshold"), num(r, key)))
                .collect(),
        )
    };
    let main = vec![
        series("pair precision (J ≥ T − 0.1)", 0, "pair_precision"),
        series("pair recall (J ≥ T + 0.05)", 1, "pair_recall"),
        (
            "removed rightly (1 − wrongly removed share)".into(),
            class(2),
            rows.iter()
                .map(|r| (num(r, "threshold"), 1.0 - num(r, "wrongly_removed_share")))
                .collect(),
        ),
    ];
    let floor = share_floor(main.iter().flat_map(|s| s.2.iter().map(|p| p.1)));
    let x = ("threshold T", x_min, x_max, xs.as_slice());
    let mut charts = vec![LineChart::new(
        "precision-recall",
        "Precision and recall against the threshold",
        x,
        ("share", floor),
        main,
    )];
    // Recall per band of true Jaccard: which pairs each threshold gives up.
    // Bands without a pair have no recall to show.
    let pairs_in = |r: &Value, band: &str| r["recall_by_band"][band]["pairs"].as_u64().unwrap_or(0);
    let bands: Vec<String> = rows
        .first()
        .and_then(|r| r["recall_by_band"].as_object())
        .map(|o| o.keys().cloned().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|band| rows.iter().any(|r| pairs_in(r, band) > 0))
        .collect();
    let by_band: Vec<Series> = bands
        .iter()
        .enumerate()
        .map(|(i, band)| {
            (
                format!("J {band}"),
                class(i),
                rows.iter()
                    .filter(|r| pairs_in(r, band) > 0)
                    .map(|r| {
                        let recall = r["recall_by_band"][band]["recall"].as_f64().unwrap_or(0.0);
                        (num(r, "threshold"), recall)
                    })
                    .collect(),
            )
        })
        .collect();
    if !by_band.is_empty() {
        charts.push(LineChart::new(
            "recall-by-band",
            "Pair recall by true Jaccard similarity, against the threshold",
            x,
            ("recall", 0.0),
            by_band,
        ));
    }
    let results = TableView {
        id: "results".into(),
        title: "Per threshold".into(),
        headers: [
            "threshold T",
            "pairs reported",
            "pair precision",
            "pair recall",
            "removed",
            "wrongly removed",
            "missed",
            "largest cluster",
            "seconds",
        ]
        .map(String::from)
        .to_vec(),
        rows: rows
            .iter()
            .map(|r| {
                let count = |k: &str| grouped(r[k].as_u64().unwrap_or(0));
                vec![
                    cell("threshold", fmt4(num(r, "threshold"))),
                    cell("pairs", count("pairs")),
                    cell("pair_precision", format!("{:.4}", num(r, "pair_precision"))),
                    cell("pair_recall", format!("{:.4}", num(r, "pair_recall"))),
                    cell("removed", count("removed")),
                    cell(
                        "wrongly_removed",
                        format!(
                            "{} ({})",
                            count("wrongly_removed"),
                            percent(num(r, "wrongly_removed_share"))
                        ),
                    ),
                    cell(
                        "missed",
                        format!("{} ({})", count("missed"), percent(num(r, "missed_share"))),
                    ),
                    cell("largest_cluster", count("largest_cluster")),
                    cell("seconds", format!("{:.2}", num(r, "seconds"))),
                ]
            })
            .collect(),
    };
    let mut headers = vec!["threshold T".to_string()];
    headers.extend(bands.iter().map(|b| format!("J {b}")));
    let band_table = TableView {
        id: "recall-by-band".into(),
        title: "Pair recall by true Jaccard (pairs in the band)".into(),
        headers,
        rows: rows
            .iter()
            .map(|r| {
                let mut cells = vec![cell("threshold", fmt4(num(r, "threshold")))];
                cells.extend(bands.iter().map(|b| {
                    let v = &r["recall_by_band"][b];
                    let shown = match pairs_in(r, b) {
                        0 => "–".to_string(),
                        n => format!(
                            "{:.4} ({})",
                            v["recall"].as_f64().unwrap_or(0.0),
                            grouped(n)
                        ),
                    };
                    cell(b, shown)
                }));
                cells
            })
            .collect(),
    };
    let truth_pairs = rows.first().and_then(|r| r["truth_pairs"].as_u64());
    let page = Page {
        version: env!("CARGO_PKG_VERSION"),
        title: "How neardup dedup does against the truth".into(),
        inputs: page::inputs(inputs),
        lead: format!("Truth: {truth}"),
        figures: vec![
            Figure::count("documents", "documents", documents as u64),
            Figure::count("thresholds", "thresholds", rows.len() as u64),
        ],
        charts,
        tables: vec![results, band_table],
        notes: vec![
            "Pair precision: the reported pairs whose true Jaccard is at least T − 0.1. Pair recall: the pairs with a true Jaccard of at least T + 0.05 that are reported.".into(),
            "Wrongly removed: removed documents whose true Jaccard with the document kept for them is below T − 0.1. Missed: pairs with a true Jaccard of at least T + 0.05 whose documents are both kept.".into(),
            match truth_pairs {
                Some(n) => format!("The recall line of the first plot is over the truth's pairs at T + 0.05 and above ({} at the lowest threshold).", grouped(n)),
                None => String::new(),
            },
        ],
    };
    page::render("eval.html", &page)
}

/// The page of plain `eval`: `rows` are its JSON lines, one per configuration and k.
pub fn grid_page(rows: &[Value], documents: usize, inputs: &[String]) -> Result<String, Error> {
    // Configurations in order of first appearance, each with its rows by k.
    let mut configs: Vec<(String, Vec<&Value>)> = Vec::new();
    for r in rows {
        let name = r["config"].as_str().unwrap_or("").to_string();
        match configs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, list)) => list.push(r),
            None => configs.push((name, vec![r])),
        }
    }
    let best = |list: &[&Value]| -> Option<usize> {
        (0..list.len()).max_by(|&a, &b| {
            num(list[a], "f1")
                .total_cmp(&num(list[b], "f1"))
                .then(b.cmp(&a))
        })
    };
    let mut ranked: Vec<(usize, f64)> = configs
        .iter()
        .enumerate()
        .map(|(i, (_, list))| (i, best(list).map_or(0.0, |b| num(list[b], "f1"))))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let plotted: Vec<usize> = ranked.iter().take(PLOTTED).map(|r| r.0).collect();
    let ks: Vec<f64> = configs
        .first()
        .map(|(_, l)| l.iter().map(|r| num(r, "k")).collect())
        .unwrap_or_default();
    let (x_min, x_max) = x_range(&ks);
    let series_of = |key: &str| -> Vec<Series> {
        plotted
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let (name, list) = &configs[c];
                (
                    name.clone(),
                    class(i),
                    list.iter().map(|r| (num(r, "k"), num(r, key))).collect(),
                )
            })
            .collect()
    };
    let x = ("distance k (bits)", x_min, x_max, ks.as_slice());
    let recall = series_of("recall_hi");
    let precision = series_of("precision");
    let charts = vec![
        LineChart::new(
            "recall",
            "Recall of pairs with Jaccard 0.9–1 against k (best configurations by F1)",
            x,
            ("recall", 0.0),
            recall,
        ),
        LineChart::new(
            "precision",
            "Precision against k (best configurations by F1)",
            x,
            (
                "precision",
                share_floor(precision.iter().flat_map(|s| s.2.iter().map(|p| p.1))),
            ),
            precision,
        ),
    ];
    let table = TableView {
        id: "results".into(),
        title: "Each configuration at its best k (by F1 on the 0.9–1 band)".into(),
        headers: [
            "configuration",
            "best k",
            "precision",
            "recall J 0.9–1",
            "F1",
            "pairs reported",
            "wrong",
        ]
        .map(String::from)
        .to_vec(),
        rows: ranked
            .iter()
            .filter_map(|&(c, _)| {
                let (name, list) = &configs[c];
                let r = list[best(list)?];
                Some(vec![
                    cell("config", name.clone()),
                    cell("k", r["k"].to_string()),
                    cell("precision", format!("{:.4}", num(r, "precision"))),
                    cell("recall_hi", format!("{:.4}", num(r, "recall_hi"))),
                    cell("f1", format!("{:.4}", num(r, "f1"))),
                    cell("reported", grouped(r["reported"].as_u64().unwrap_or(0))),
                    cell("wrong", grouped(r["wrong"].as_u64().unwrap_or(0))),
                ])
            })
            .collect(),
    };
    let page = Page {
        version: env!("CARGO_PKG_VERSION"),
        title: "Fingerprint settings on edited copies".into(),
        inputs: page::inputs(inputs),
        lead: "Every pair within k bits, scored against the edits' true Jaccard similarity.".into(),
        figures: vec![
            Figure::count("documents", "documents and variants", documents as u64),
            Figure::count("configurations", "configurations", configs.len() as u64),
        ],
        charts,
        tables: vec![table],
        notes: vec![
            "Precision: the reported pairs that are related (one family, or a true Jaccard of at least 0.5). Recall: the (original, variant) pairs with a Jaccard of 0.9 to 1 found within k bits.".into(),
        ],
    };
    page::render("eval.html", &page)
}
