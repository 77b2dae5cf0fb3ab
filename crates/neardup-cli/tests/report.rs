//! `neardup dedup --report` and `neardup eval --report` end to end: the page is parsed as a
//! browser would parse it, and its numbers are checked against the run's own outputs
//! (--stats-json, --clusters) and the input.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Output;

use common::neardup;
use scraper::{ElementRef, Html, Selector};
use serde_json::Value;

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    err
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn id(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn text(e: ElementRef) -> String {
    e.text().collect()
}

/// The elements of `doc` matching `css`.
fn all<'a>(doc: &'a Html, css: &str) -> Vec<ElementRef<'a>> {
    doc.select(&sel(css)).collect()
}

fn attr(e: ElementRef, name: &str) -> String {
    e.value().attr(name).unwrap_or_default().to_string()
}

/// The `data-value` of the figure `key` of the table `table`.
fn figure(doc: &Html, table: &str, key: &str) -> String {
    let cells = all(doc, &format!("table#{table} td[data-key=\"{key}\"]"));
    assert_eq!(cells.len(), 1, "{table}.{key}");
    attr(cells[0], "data-value")
}

/// `(id, text)` of every record of a JSON Lines corpus.
fn corpus(path: &str) -> HashMap<String, String> {
    json_lines(Path::new(path))
        .iter()
        .map(|r| (id(&r["id"]), r["text"].as_str().unwrap_or("").to_string()))
        .collect()
}

/// A run of `neardup dedup INPUT --report --stats-json --clusters ARGS` in `dir`: the
/// parsed page, the summary and the clusters.
fn run(dir: &Path, input: &str, args: &[&str]) -> (Html, Value, Vec<Value>) {
    let (report, stats, clusters) = (
        dir.join("report.html"),
        dir.join("stats.json"),
        dir.join("clusters.jsonl"),
    );
    let mut all_args = vec![
        "dedup",
        input,
        "--report",
        report.to_str().unwrap(),
        "--stats-json",
        stats.to_str().unwrap(),
        "--clusters",
        clusters.to_str().unwrap(),
        "--quiet",
    ];
    all_args.extend(args);
    ok(&neardup(&all_args, b""));
    let html = std::fs::read_to_string(&report).unwrap();
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (Html::parse_document(&html), stats, json_lines(&clusters))
}

#[test]
fn the_page_states_the_runs_own_figures() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("planted.jsonl");
    let (doc, stats, clusters) = run(dir.path(), &input, &[]);
    assert!(!clusters.is_empty());
    for key in [
        "documents",
        "kept",
        "exact_duplicates",
        "near_duplicates",
        "clusters",
        "largest_cluster",
        "candidates",
        "verified",
        "bytes",
    ] {
        assert_eq!(figure(&doc, "counts", key), stats[key].to_string(), "{key}");
    }
    let removed =
        stats["exact_duplicates"].as_u64().unwrap() + stats["near_duplicates"].as_u64().unwrap();
    assert_eq!(figure(&doc, "counts", "removed"), removed.to_string());
    assert_eq!(
        removed,
        clusters
            .iter()
            .map(|c| c["size"].as_u64().unwrap() - 1)
            .sum::<u64>()
    );
    for key in ["fingerprint", "match", "write", "total"] {
        let shown: f64 = figure(&doc, "phases", key).parse().unwrap();
        assert_eq!(shown, stats["seconds"][key].as_f64().unwrap(), "{key}");
    }
    assert_eq!(figure(&doc, "settings", "threshold"), "0.8");
    assert_eq!(figure(&doc, "settings", "keep"), "first");
    assert_eq!(
        figure(&doc, "settings", "rows"),
        stats["settings"]["rows"].to_string()
    );
    // The input is named; nothing loads from elsewhere and nothing runs.
    assert!(text(all(&doc, "header")[0]).contains(&input));
    assert!(all(&doc, "script").is_empty());
    assert!(all(&doc, "link, img, iframe, object, embed").is_empty());
    let csp = all(&doc, "meta[http-equiv=\"Content-Security-Policy\"]");
    assert!(attr(csp[0], "content").starts_with("default-src 'none'"));
}

#[test]
fn histograms_count_what_the_clusters_hold() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("planted.jsonl");
    let (doc, _, clusters) = run(dir.path(), &input, &[]);
    let texts = corpus(&input);
    // Cluster sizes: bars in the bins 2, 3, 4, 5–8, …; every cluster in one.
    let sizes: Vec<u64> = all(&doc, "#cluster-sizes rect.bar")
        .iter()
        .map(|b| attr(*b, "data-count").parse().unwrap())
        .collect();
    let mut want = vec![0u64; sizes.len()];
    for c in &clusters {
        let s = c["size"].as_u64().unwrap();
        let bin = match s {
            2..=4 => s as usize - 2,
            _ => 3 + (s - 1).ilog2() as usize - 2,
        };
        want[bin] += 1;
    }
    assert_eq!(sizes, want);
    // Similarity: every removed document whose text differs from its kept one's.
    let mut differing = 0u64;
    let mut lowest = 1.0f64;
    for c in &clusters {
        let rep = id(&c["representative"]);
        for m in c["members"].as_array().unwrap() {
            let mid = id(&m["id"]);
            if mid != rep && texts[&mid] != texts[&rep] {
                differing += 1;
                lowest = lowest.min(m["similarity"].as_f64().unwrap());
            }
        }
    }
    let bars = all(&doc, "#similarity rect.bar");
    let total: u64 = bars
        .iter()
        .map(|b| attr(*b, "data-count").parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, differing);
    // Bins of 0.01 from the threshold (or below it, the lowest) to 1.
    let first = (lowest.min(0.8) * 100.0 + 1e-6).floor() as usize;
    assert_eq!(bars.len(), 100 - first);
    // The threshold is marked where the axis says 0.8.
    let marker = all(&doc, "#similarity line.marker");
    assert_eq!(marker.len(), 1);
    let tick = all(&doc, "#similarity .x-ticks text")
        .into_iter()
        .find(|t| text(*t) == "0.8")
        .expect("a tick at 0.8");
    assert_eq!(attr(marker[0], "x1"), attr(tick, "x"));
    assert!(text(all(&doc, "#similarity .marker-label")[0]).contains("threshold 0.8"));
}

#[test]
fn the_largest_clusters_and_the_borderline_pairs_are_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    // Families of copies of different sizes, so the largest clusters are known.
    let base: Vec<String> = (0..40)
        .map(|f| {
            (0..80)
                .map(|w| format!("f{f}w{}", (w * 7 + f) % 97))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut lines = Vec::new();
    for (f, text) in base.iter().enumerate() {
        for copy in 0..=(f % 12) {
            // Each copy changes one word: about 0.9 of the shingles stay.
            let edited = if copy == 0 {
                text.clone()
            } else {
                text.replacen(
                    &format!("f{f}w{}", (copy * 7 + f) % 97),
                    &format!("x{copy}"),
                    1,
                )
            };
            lines.push(
                serde_json::json!({"id": format!("fam{f}/copy{copy}"), "text": edited}).to_string(),
            );
        }
    }
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let (doc, _, clusters) = run(dir.path(), input.to_str().unwrap(), &[]);
    let texts = corpus(input.to_str().unwrap());
    let by_index: HashMap<u64, &Value> = clusters
        .iter()
        .map(|c| (c["cluster"].as_u64().unwrap(), c))
        .collect();

    // The 8 largest, biggest first, ties in cluster order.
    let mut order: Vec<(u64, u64)> = clusters
        .iter()
        .map(|c| (c["size"].as_u64().unwrap(), c["cluster"].as_u64().unwrap()))
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let shown: Vec<(u64, u64)> = all(&doc, "article.cluster")
        .iter()
        .map(|a| {
            (
                attr(*a, "data-size").parse().unwrap(),
                attr(*a, "data-cluster").parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(shown, order[..8]);
    for a in all(&doc, "article.cluster") {
        let c = by_index[&attr(a, "data-cluster").parse::<u64>().unwrap()];
        let rep = id(&c["representative"]);
        assert!(text(a.select(&sel("h3")).next().unwrap()).contains(&rep));
        let members: HashMap<String, f64> = c["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (id(&m["id"]), m["similarity"].as_f64().unwrap()))
            .collect();
        let rows: Vec<(String, f64)> = a
            .select(&sel("table.members tr"))
            .skip(1)
            .filter(|r| r.value().attr("class").is_none())
            .map(|r| {
                let cells: Vec<String> = r.select(&sel("td")).map(text).collect();
                (cells[0].clone(), cells[1].parse().unwrap())
            })
            .collect();
        assert_eq!(
            rows.len(),
            members.len() - 1,
            "every removed member is listed"
        );
        for (i, (m, s)) in rows.iter().enumerate() {
            assert_ne!(m, &rep);
            assert!((members[m] - s).abs() < 6e-4, "{m}: {s} vs {}", members[m]);
            if i > 0 {
                assert!(rows[i - 1].1 <= *s, "least similar first");
            }
        }
        // Beside the kept document: the least similar member.
        let pair = a.select(&sel(".pair")).next().unwrap();
        assert_eq!(attr(pair, "data-kept"), rep);
        assert_eq!(attr(pair, "data-removed"), rows[0].0);
    }

    // Borderline: removed documents (texts differing from their kept one's) nearest 0.8,
    // each beside the document it was removed for.
    let mut gaps: Vec<(f64, String, String)> = Vec::new();
    for c in &clusters {
        let rep = id(&c["representative"]);
        for m in c["members"].as_array().unwrap() {
            let mid = id(&m["id"]);
            if mid != rep && texts[&mid] != texts[&rep] {
                let s = m["similarity"].as_f64().unwrap();
                gaps.push(((s - 0.8).abs(), rep.clone(), mid));
            }
        }
    }
    gaps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pairs = all(&doc, "#borderline .pair");
    assert_eq!(pairs.len(), 20.min(gaps.len()));
    let kept_for: HashMap<&str, &str> = gaps.iter().map(|g| (g.2.as_str(), g.1.as_str())).collect();
    let cutoff = gaps[pairs.len() - 1].0;
    for p in pairs {
        let removed = attr(p, "data-removed");
        assert_eq!(kept_for[removed.as_str()], attr(p, "data-kept"));
        let s: f64 = attr(p, "data-similarity").parse().unwrap();
        // As near as any not shown (similarities in --clusters have three decimals).
        assert!((s - 0.8).abs() <= cutoff + 6e-4, "{removed}: {s}");
        // Each side shows its own document's words, but for the folds.
        for (side, doc_id) in [("kept", attr(p, "data-kept")), ("removed", removed.clone())] {
            let el = p
                .select(&sel(&format!(".side.{side} .text")))
                .next()
                .unwrap();
            for chunk in unfolded(el) {
                assert!(texts[&doc_id].contains(chunk.trim()), "{doc_id}: {chunk:?}");
            }
        }
    }
}

/// The stretches of a diff side between its folds.
fn unfolded(side: ElementRef) -> Vec<String> {
    let mut chunks = vec![String::new()];
    for node in side.children() {
        match ElementRef::wrap(node) {
            Some(e) if e.value().classes().any(|c| c == "skip") => chunks.push(String::new()),
            Some(e) => chunks.last_mut().unwrap().push_str(&text(e)),
            None => {
                if let Some(t) = node.value().as_text() {
                    chunks.last_mut().unwrap().push_str(t);
                }
            }
        }
    }
    chunks
}

#[test]
fn the_diff_marks_the_changed_words() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let words: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    let kept = format!("the quick brown fox {}", words.join(" "));
    let removed = format!("the quick red fox {}", words.join(" "));
    let lines = [
        serde_json::json!({"id": "a", "text": kept}).to_string(),
        serde_json::json!({"id": "b", "text": removed}).to_string(),
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let (doc, _, clusters) = run(dir.path(), input.to_str().unwrap(), &[]);
    assert_eq!(clusters.len(), 1);
    let pairs = all(&doc, "#borderline .pair");
    assert_eq!(pairs.len(), 1);
    let marks = |css: &str| -> Vec<String> { pairs[0].select(&sel(css)).map(text).collect() };
    assert_eq!(marks(".side.kept del"), ["brown"]);
    assert_eq!(marks(".side.removed ins"), ["red"]);
    assert!(marks(".side.kept ins").is_empty() && marks(".side.removed del").is_empty());
    // The long shared tail folds after its context.
    let skip = marks(".side.kept .skip");
    assert_eq!(skip.len(), 1, "{skip:?}");
    assert!(skip[0].contains("49 words"), "{skip:?}");
    assert!(text(pairs[0].select(&sel(".pair-head")).next().unwrap())
        .contains("1 word only in the kept"));
}

#[test]
fn markup_in_the_corpus_is_shown_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let body: Vec<String> = (0..60).map(|i| format!("w{i}")).collect();
    let body = body.join(" ");
    let evil = [
        "<script>alert(1)</script>",
        "\"><img src=x onerror=alert(2)>",
        "</div></div><iframe src=\"https://example.org\"></iframe>",
        "{{ 7*7 }} {% raw %}",
    ];
    let lines = [
        serde_json::json!({"id": "<b>kept</b>/x", "text": format!("{} {body}", evil[0])}).to_string(),
        serde_json::json!({"id": "\"><script>alert(3)</script>/y", "text": format!("{} {body} {}", evil[1], evil[2])}).to_string(),
        serde_json::json!({"id": "z/{{ 7*7 }}", "text": format!("{body} {}", evil[3])}).to_string(),
    ];
    std::fs::write(&input, lines.join("\n")).unwrap();
    let (doc, stats, _) = run(dir.path(), input.to_str().unwrap(), &["--threshold", "0.5"]);
    assert!(stats["near_duplicates"].as_u64().unwrap() >= 1);
    // Not one element came from the corpus.
    assert!(all(&doc, "script, img, iframe, b").is_empty());
    for e in all(&doc, "*") {
        for (name, _) in e.value().attrs() {
            assert!(
                !name.starts_with("on"),
                "an event handler attribute: {name}"
            );
        }
    }
    // The texts are there, as text, and the template syntax was not evaluated.
    let page = text(all(&doc, "body")[0]);
    for t in evil {
        assert!(page.contains(t), "{t} not shown as text");
    }
    assert!(page.contains("<b>kept</b>/x"));
    let raw = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(!raw.contains("<script") && !raw.contains("<img") && !raw.contains("<iframe"));
}

#[test]
fn sources_are_counted_from_path_like_ids() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    let template: Vec<String> = (0..60).map(|i| format!("boiler{i}")).collect();
    let template = template.join(" ");
    let mut lines = Vec::new();
    // py/3.x: the same page in every version; npm: distinct pages; one id without a directory.
    for v in ["3.10", "3.11", "3.12"] {
        for p in 0..4 {
            lines.push(serde_json::json!({"id": format!("py/{v}/page{p}.py"), "text": format!("{template} page{p}")}).to_string());
        }
    }
    for p in 0..5 {
        let words: Vec<String> = (0..60).map(|i| format!("npm{p}x{i}")).collect();
        lines.push(
            serde_json::json!({"id": format!("npm/pkg{p}/README.md"), "text": words.join(" ")})
                .to_string(),
        );
    }
    lines.push(
        serde_json::json!({"id": "loose", "text": "a loose document of its own words only here"})
            .to_string(),
    );
    std::fs::write(&input, lines.join("\n")).unwrap();
    let (doc, _, clusters) = run(dir.path(), input.to_str().unwrap(), &[]);
    // The oracle: removed ids from --clusters, counted per first directory and per two.
    let removed: HashSet<String> = clusters
        .iter()
        .flat_map(|c| {
            let rep = id(&c["representative"]);
            c["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(id_of_member)
                .filter(move |m| *m != rep)
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(!removed.is_empty());
    let mut want: [BTreeMap<String, (u64, u64)>; 2] = Default::default();
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap();
        let i = id(&v["id"]);
        let parts: Vec<&str> = i.split('/').collect();
        let (one, two) = match parts.len() {
            1 => (
                "(ids without a directory)".to_string(),
                "(ids without a directory)".to_string(),
            ),
            2 => (parts[0].to_string(), parts[0].to_string()),
            _ => (parts[0].to_string(), format!("{}/{}", parts[0], parts[1])),
        };
        for (level, name) in [one, two].into_iter().enumerate() {
            let e = want[level].entry(name).or_default();
            e.0 += 1;
            e.1 += u64::from(removed.contains(&i));
        }
    }
    let tables = all(&doc, "#sources table.sources");
    assert_eq!(tables.len(), 2);
    for (level, t) in tables.iter().enumerate() {
        let got: BTreeMap<String, (u64, u64)> = t
            .select(&sel("tr"))
            .skip(1)
            .map(|r| {
                let c: Vec<String> = r
                    .select(&sel("td"))
                    .map(text)
                    .map(|t| t.replace(',', ""))
                    .collect();
                let (docs, kept, rem): (u64, u64, u64) = (
                    c[1].parse().unwrap(),
                    c[2].parse().unwrap(),
                    c[3].parse().unwrap(),
                );
                assert_eq!(docs, kept + rem);
                (c[0].clone(), (docs, rem))
            })
            .collect();
        assert_eq!(got, want[level], "level {level}");
    }
}

fn id_of_member(m: &Value) -> String {
    id(&m["id"])
}

#[test]
fn the_page_stays_small_whatever_the_corpus() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("docs.jsonl");
    // 60 clusters of 3 near-duplicates of long texts (about 50 KB each).
    let mut lines = Vec::new();
    for f in 0..60 {
        let words: Vec<String> = (0..5_000).map(|i| format!("f{f}w{i}")).collect();
        let text = words.join(" ");
        for copy in 0..3 {
            let edited = if copy == 0 {
                text.clone()
            } else {
                text.replacen(&format!("f{f}w{}", 7 * copy), "CHANGED", 1)
            };
            lines.push(
                serde_json::json!({"id": format!("f{f}/{copy}"), "text": edited}).to_string(),
            );
        }
    }
    std::fs::write(&input, lines.join("\n")).unwrap();
    let (doc, stats, _) = run(dir.path(), input.to_str().unwrap(), &[]);
    assert_eq!(stats["clusters"], 60);
    assert_eq!(all(&doc, "article.cluster").len(), 8);
    assert_eq!(all(&doc, "#borderline .pair").len(), 20);
    // Texts are compared on their first 32 KB and shown folded: the page is a small
    // fraction of the 10 MB input.
    let size = std::fs::metadata(dir.path().join("report.html"))
        .unwrap()
        .len();
    assert!(size < 300_000, "{size} bytes");
    for p in all(&doc, ".pair") {
        assert!(text(p.select(&sel(".pair-head")).next().unwrap())
            .contains("compared on the first 32 KB"));
    }
}

#[test]
fn nothing_removed_and_the_distance_rule() {
    let dir = tempfile::tempdir().unwrap();
    let kjv = format!("{}/../../examples/kjv.jsonl", env!("CARGO_MANIFEST_DIR"));
    let (doc, stats, clusters) = run(dir.path(), &kjv, &["--threshold", "0.9"]);
    assert!(clusters.is_empty());
    assert_eq!(
        figure(&doc, "counts", "kept"),
        stats["documents"].to_string()
    );
    assert_eq!(all(&doc, "#no-clusters").len(), 1);
    assert!(all(&doc, "svg").is_empty());
    assert!(all(&doc, ".pair").is_empty());

    let (doc, _, clusters) = run(dir.path(), &fixture("planted.jsonl"), &["--distance", "40"]);
    assert!(!clusters.is_empty());
    assert_eq!(figure(&doc, "settings", "distance"), "40");
    assert_eq!(all(&doc, "#distance line.marker").len(), 1);
    let max = clusters
        .iter()
        .flat_map(|c| {
            c["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["distance"].as_u64().unwrap())
        })
        .max()
        .unwrap();
    assert!(max <= 40);
    // One bar per distance from 0 to the rule's.
    assert_eq!(all(&doc, "#distance rect.bar").len(), 41);
}

#[test]
fn an_unwritable_report_fails_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let clusters = dir.path().join("c.jsonl");
    let o = neardup(
        &[
            "dedup",
            &fixture("planted.jsonl"),
            "--clusters",
            clusters.to_str().unwrap(),
            "--report",
            "/nonexistent-dir/r.html",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot create output '/nonexistent-dir/r.html'"),
        "{err}"
    );
    assert!(
        !err.contains("documents"),
        "no summary: no work was done: {err}"
    );
    // The report may not overwrite an input, nor share standard output.
    let input = fixture("planted.jsonl");
    let o = neardup(&["dedup", &input, "--report", &input], b"");
    assert_eq!(o.status.code(), Some(2));
    let o = neardup(&["dedup", &input, "--report", "-", "--clusters", "-"], b"");
    assert_eq!(o.status.code(), Some(2));
    let o = neardup(
        &[
            "eval",
            &input,
            "--truth",
            &fixture("planted_truth.jsonl"),
            "--report",
            "/nonexistent-dir/r.html",
        ],
        b"",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent-dir/r.html"));
}

#[test]
fn eval_report_plots_and_tabulates_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (rows_path, page) = (dir.path().join("rows.jsonl"), dir.path().join("eval.html"));
    ok(&neardup(
        &[
            "eval",
            &fixture("planted.jsonl"),
            "--truth",
            &fixture("planted_truth.jsonl"),
            "--thresholds",
            "0.9,0.6,0.8",
            "-o",
            rows_path.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ],
        b"",
    ));
    let mut rows = json_lines(&rows_path);
    rows.sort_by(|a, b| {
        a["threshold"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["threshold"].as_f64().unwrap())
    });
    let doc = Html::parse_document(&std::fs::read_to_string(&page).unwrap());
    let table: Vec<HashMap<String, String>> = all(&doc, "table#results tr")
        .into_iter()
        .skip(1)
        .map(|r| {
            r.select(&sel("td"))
                .map(|c| (attr(c, "data-key"), text(c)))
                .collect()
        })
        .collect();
    assert_eq!(table.len(), 3);
    for (r, t) in rows.iter().zip(&table) {
        assert_eq!(
            t["threshold"].parse::<f64>().unwrap(),
            r["threshold"].as_f64().unwrap()
        );
        for k in ["pair_precision", "pair_recall"] {
            assert_eq!(t[k], format!("{:.4}", r[k].as_f64().unwrap()), "{k}");
        }
        assert_eq!(t["removed"].replace(',', ""), r["removed"].to_string());
        assert!(t["wrongly_removed"].starts_with(&r["wrongly_removed"].to_string()));
    }
    // Precision and recall against the threshold: a line each, a point per threshold, in
    // increasing threshold (x) order, higher values higher up (smaller y).
    let series = all(&doc, "#precision-recall g.series");
    assert_eq!(series.len(), 3);
    for (s, key) in series.iter().zip(["pair_precision", "pair_recall"]) {
        let points: Vec<(f64, f64)> = s
            .select(&sel("circle"))
            .map(|c| {
                (
                    attr(c, "cx").parse().unwrap(),
                    attr(c, "cy").parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(points.len(), 3);
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0));
        for (i, w) in points.windows(2).enumerate() {
            let (a, b) = (
                rows[i][key].as_f64().unwrap(),
                rows[i + 1][key].as_f64().unwrap(),
            );
            if a < b {
                assert!(w[0].1 > w[1].1);
            } else if a == b {
                assert_eq!(w[0].1, w[1].1);
            }
        }
    }
    assert!(!all(&doc, "#recall-by-band g.series").is_empty());
    assert!(all(&doc, "script").is_empty());
}

#[test]
fn plain_eval_report_plots_against_the_distance() {
    let dir = tempfile::tempdir().unwrap();
    let (rows_path, page) = (dir.path().join("rows.jsonl"), dir.path().join("eval.html"));
    ok(&neardup(
        &[
            "eval",
            &fixture("planted.jsonl"),
            "--configs",
            "default",
            "--originals",
            "30",
            "--max-k",
            "6",
            "-o",
            rows_path.to_str().unwrap(),
            "--report",
            page.to_str().unwrap(),
        ],
        b"",
    ));
    let rows = json_lines(&rows_path);
    let doc = Html::parse_document(&std::fs::read_to_string(&page).unwrap());
    let best = rows
        .iter()
        .max_by(|a, b| {
            a["f1"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["f1"].as_f64().unwrap())
        })
        .unwrap();
    let cells: HashMap<String, String> = all(&doc, "table#results tr td")
        .into_iter()
        .map(|c| (attr(c, "data-key"), text(c)))
        .collect();
    assert_eq!(cells["config"], "default");
    assert_eq!(cells["f1"], format!("{:.4}", best["f1"].as_f64().unwrap()));
    for chart in ["#recall", "#precision"] {
        let points = all(&doc, &format!("{chart} circle"));
        assert_eq!(points.len(), 7, "k = 0 to 6");
    }
}

#[test]
fn closure_longest_and_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("planted.jsonl");
    let texts = corpus(&input);
    let (doc, stats, clusters) = run(
        dir.path(),
        &input,
        &["--closure", "--keep", "longest", "--threshold", "0.6"],
    );
    assert_eq!(figure(&doc, "settings", "closure"), "true");
    assert_eq!(figure(&doc, "settings", "keep"), "longest");
    // Every removed document is in the similarity plot or identical to its kept one.
    let mut identical = 0u64;
    for c in &clusters {
        let rep = id(&c["representative"]);
        for m in c["members"].as_array().unwrap() {
            let mid = id(&m["id"]);
            identical += u64::from(mid != rep && texts[&mid] == texts[&rep]);
        }
    }
    let plotted: u64 = all(&doc, "#similarity rect.bar")
        .iter()
        .map(|b| attr(*b, "data-count").parse::<u64>().unwrap())
        .sum();
    let removed =
        stats["exact_duplicates"].as_u64().unwrap() + stats["near_duplicates"].as_u64().unwrap();
    assert_eq!(plotted + identical, removed);
    let marker = all(&doc, "#similarity .marker-label");
    assert!(text(marker[0]).contains("threshold 0.6"));

    // From standard input: the page says so, and counts the same.
    let page = dir.path().join("stdin.html");
    let o = neardup(
        &["dedup", "--report", page.to_str().unwrap(), "--quiet"],
        &std::fs::read(&input).unwrap(),
    );
    ok(&o);
    let doc = Html::parse_document(&std::fs::read_to_string(&page).unwrap());
    assert!(text(all(&doc, "header")[0]).contains("standard input"));
    assert_eq!(figure(&doc, "counts", "documents"), "1500");
}
