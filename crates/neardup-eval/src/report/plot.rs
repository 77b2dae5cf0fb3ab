//! Plots as data: every coordinate is computed here, and `templates/plots.html` turns the
//! data into SVG elements. Sizes are in SVG user units (the page scales the drawing).

use serde::Serialize;

/// Width and height of every plot, and the margins around its plotting area.
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 20.0;
const BOTTOM: f64 = 48.0;

/// A bin of a histogram.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bin {
    /// What the bin holds, for its tooltip ("0.80–0.81", "5–8").
    pub label: String,
    /// How many.
    pub count: u64,
}

/// A labelled position on an axis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tick {
    /// Where, in SVG units along the axis.
    pub at: f64,
    /// What it says.
    pub label: String,
}

/// One bar.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    /// The bin's label and count, for the tooltip and the count shown above the bar.
    pub label: String,
    pub count: u64,
    /// The count as written above the bar: 63022 → "63k".
    pub shown: String,
}

/// A vertical line across the plotting area, such as the threshold.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Marker {
    pub x: f64,
    pub label: String,
    /// How the label above the plot aligns to the line: "middle", or "end" / "start"
    /// near an edge, so that it stays inside the drawing.
    pub anchor: &'static str,
}

/// The frame every plot shares.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Frame {
    fn new() -> Frame {
        Frame {
            width: WIDTH,
            height: HEIGHT,
            left: LEFT,
            top: TOP,
            right: WIDTH - RIGHT,
            bottom: HEIGHT - BOTTOM,
        }
    }

    fn plot_width(&self) -> f64 {
        self.right - self.left
    }

    fn plot_height(&self) -> f64 {
        self.bottom - self.top
    }
}

/// A histogram: bars of equal width side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BarChart {
    /// The element id of the drawing, for links and tests.
    pub id: String,
    pub title: String,
    pub frame: Frame,
    pub bars: Vec<Bar>,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    pub x_label: String,
    pub y_label: String,
    pub marker: Option<Marker>,
    /// Whether each bar's count is written above it (few bars) or only in its tooltip.
    pub counts_shown: bool,
}

/// How a bar chart's counts map to heights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Logarithmic, for counts spanning orders of magnitude (cluster sizes); a count of 1
    /// still gets a visible bar.
    Log,
}

/// Where the x axis of a bar chart is labelled and marked: positions are in bins, so 0 is
/// the left edge of the first bin and `bins.len()` the right edge of the last.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct XAxis {
    pub label: String,
    /// Labels at bin edges (or centres, with a fraction .5).
    pub ticks: Vec<(f64, String)>,
    /// A line across the plot at this position.
    pub marker: Option<(f64, String)>,
}

impl BarChart {
    /// A histogram of `bins`.
    pub fn new(
        id: &str,
        title: &str,
        bins: &[Bin],
        x: XAxis,
        y_label: &str,
        scale: Scale,
    ) -> BarChart {
        let frame = Frame::new();
        let slots = bins.len().max(1) as f64;
        let slot = frame.plot_width() / slots;
        let max = bins.iter().map(|b| b.count).max().unwrap_or(0);
        let (top, y_ticks) = match scale {
            Scale::Linear => linear_ticks(max),
            Scale::Log => log_ticks(max),
        };
        let height_of = |count: u64| -> f64 {
            let share = match scale {
                Scale::Linear => count as f64 / top.max(1.0),
                // From 0.5 up, so that 1 stands a little above the axis.
                Scale::Log if count == 0 => 0.0,
                Scale::Log => (count as f64 / 0.5).log10() / (top / 0.5).log10(),
            };
            share.clamp(0.0, 1.0) * frame.plot_height()
        };
        let y_of = |value: f64| -> f64 {
            let share = match scale {
                Scale::Linear => value / top.max(1.0),
                Scale::Log => (value / 0.5).log10() / (top / 0.5).log10(),
            };
            frame.bottom - share * frame.plot_height()
        };
        // A hairline between neighbours, wider gaps when bars are few.
        let gap = if bins.len() > 30 { 1.0 } else { slot * 0.12 };
        let bars = bins
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let h = height_of(b.count);
                Bar {
                    x: round2(frame.left + i as f64 * slot + gap / 2.0),
                    y: round2(frame.bottom - h),
                    width: round2((slot - gap).max(0.5)),
                    height: round2(h),
                    label: b.label.clone(),
                    count: b.count,
                    shown: compact(b.count),
                }
            })
            .collect();
        let at = |pos: f64| round2(frame.left + pos * slot);
        BarChart {
            id: id.into(),
            title: title.into(),
            bars,
            x_ticks: x
                .ticks
                .into_iter()
                .map(|(p, label)| Tick { at: at(p), label })
                .collect(),
            y_ticks: y_ticks
                .into_iter()
                .map(|v| Tick {
                    at: round2(y_of(v)),
                    label: count_label(v),
                })
                .collect(),
            x_label: x.label,
            y_label: y_label.into(),
            marker: x.marker.map(|(p, label)| {
                let x = at(p);
                // Half a label's width ("threshold 0.85" is about 80 units at 11px) from
                // an edge, a centred label would be cut off by the drawing's border.
                let anchor = match x {
                    x if x > frame.right - 60.0 => "end",
                    x if x < frame.left + 60.0 => "start",
                    _ => "middle",
                };
                Marker { x, label, anchor }
            }),
            counts_shown: bins.len() <= 24,
            frame,
        }
    }
}

/// A point of a line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Its values, for the tooltip.
    pub label: String,
}

/// One line of a line chart; `class` picks its colour and dashes in the page's style.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Line {
    pub name: String,
    pub class: String,
    pub points: Vec<Point>,
}

/// Lines over a numeric x axis, y from 0 to 1 (shares: precision, recall).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LineChart {
    pub id: String,
    pub title: String,
    pub frame: Frame,
    pub lines: Vec<Line>,
    pub x_ticks: Vec<Tick>,
    pub y_ticks: Vec<Tick>,
    pub x_label: String,
    pub y_label: String,
}

/// A line's data before scaling: name, style class, and (x, y) points.
pub type Series = (String, String, Vec<(f64, f64)>);

impl LineChart {
    /// Lines of `series` over x in `[x_min, x_max]` (ticks at `x_ticks`), y in `[y_min, 1]`.
    pub fn new(
        id: &str,
        title: &str,
        (x_label, x_min, x_max, x_ticks): (&str, f64, f64, &[f64]),
        (y_label, y_min): (&str, f64),
        series: Vec<Series>,
    ) -> LineChart {
        let frame = Frame::new();
        let span = (x_max - x_min).max(1e-9);
        let y_span = (1.0 - y_min).max(1e-9);
        let px = |x: f64| round2(frame.left + (x - x_min) / span * frame.plot_width());
        let py = |y: f64| round2(frame.bottom - (y - y_min) / y_span * frame.plot_height());
        let step = nice_step(y_span / 5.0);
        let mut y_ticks = Vec::new();
        let mut v = (y_min / step).ceil() * step;
        while v <= 1.0 + 1e-9 {
            y_ticks.push(Tick {
                at: py(v),
                label: trim_decimal(v, step),
            });
            v += step;
        }
        LineChart {
            id: id.into(),
            title: title.into(),
            lines: series
                .into_iter()
                .map(|(name, class, points)| Line {
                    points: points
                        .iter()
                        .map(|&(x, y)| Point {
                            x: px(x),
                            y: py(y.clamp(y_min, 1.0)),
                            label: format!("{name}: {} at {}", fmt4(y), fmt4(x)),
                        })
                        .collect(),
                    name,
                    class,
                })
                .collect(),
            x_ticks: x_ticks
                .iter()
                .map(|&x| Tick {
                    at: px(x),
                    label: fmt4(x),
                })
                .collect(),
            y_ticks,
            x_label: x_label.into(),
            y_label: y_label.into(),
            frame,
        }
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// `x` with up to four decimals and no trailing zeros.
pub fn fmt4(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s.into()
    }
}

fn trim_decimal(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$}")
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw - 1e-12)
        .unwrap_or(10.0 * p)
}

/// The top of a linear count axis and its ticks: about five round steps, whole numbers.
fn linear_ticks(max: u64) -> (f64, Vec<f64>) {
    let step = nice_step(max.max(1) as f64 / 5.0).max(1.0).round();
    let top = ((max.max(1) as f64) / step).ceil() * step;
    let ticks = (0..)
        .map(|i| i as f64 * step)
        .take_while(|&v| v <= top + 0.5)
        .collect();
    (top, ticks)
}

/// The top of a logarithmic count axis and its ticks: powers of ten.
fn log_ticks(max: u64) -> (f64, Vec<f64>) {
    let mut top = 10.0;
    while top < max as f64 {
        top *= 10.0;
    }
    let ticks = std::iter::successors(Some(1.0), |&v| Some(v * 10.0))
        .take_while(|&v| v <= top)
        .collect();
    (top, ticks)
}

/// A count above a bar, in at most four characters or so: 999, 9999, 12k, 1.2M.
fn compact(n: u64) -> String {
    match n {
        n if n < 10_000 => n.to_string(),
        n if n < 1_000_000 => format!("{}k", (n as f64 / 1e3).round()),
        n => format!("{}M", fmt4((n as f64 / 1e5).round() / 10.0)),
    }
}

/// A count on an axis: 1200 → "1.2k", 3000000 → "3M".
fn count_label(v: f64) -> String {
    match v {
        v if v >= 1e6 => format!("{}M", fmt4(v / 1e6)),
        v if v >= 1e4 => format!("{}k", fmt4(v / 1e3)),
        v => format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(counts: &[u64]) -> Vec<Bin> {
        counts
            .iter()
            .enumerate()
            .map(|(i, &count)| Bin {
                label: i.to_string(),
                count,
            })
            .collect()
    }

    #[test]
    fn bar_heights_are_proportional_and_inside_the_frame() {
        let c = BarChart::new(
            "c",
            "t",
            &bins(&[0, 5, 10, 2]),
            XAxis::default(),
            "n",
            Scale::Linear,
        );
        let f = &c.frame;
        for b in &c.bars {
            assert!(b.x >= f.left && b.x + b.width <= f.right + 0.01, "{b:?}");
            assert!(
                (b.y + b.height - f.bottom).abs() < 0.02,
                "bars stand on the axis: {b:?}"
            );
        }
        assert_eq!(c.bars[0].height, 0.0);
        // 10 is the top of the axis (ticks 0, 2, …, 10): the full height; 5 half of it.
        assert!((c.bars[2].height - f.bottom + f.top).abs() < 0.02);
        assert!((c.bars[1].height * 2.0 - c.bars[2].height).abs() < 0.03);
        let labels: Vec<&str> = c.y_ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["0", "2", "4", "6", "8", "10"]);
    }

    #[test]
    fn log_scale_shows_ones_and_orders_of_magnitude() {
        let c = BarChart::new(
            "c",
            "t",
            &bins(&[1, 10, 100, 0]),
            XAxis::default(),
            "n",
            Scale::Log,
        );
        assert!(c.bars[0].height > 1.0, "a count of 1 is visible");
        // Equal steps per factor of ten.
        let d1 = c.bars[1].height - c.bars[0].height;
        let d2 = c.bars[2].height - c.bars[1].height;
        assert!((d1 - d2).abs() < 0.05, "{d1} vs {d2}");
        assert_eq!(c.bars[3].height, 0.0);
        let labels: Vec<&str> = c.y_ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels, ["1", "10", "100"]);
    }

    #[test]
    fn marker_and_ticks_sit_at_their_bin_positions() {
        let x = XAxis {
            label: "x".into(),
            ticks: vec![(0.0, "0".into()), (4.0, "4".into())],
            marker: Some((2.0, "half".into())),
        };
        let c = BarChart::new("c", "t", &bins(&[1, 1, 1, 1]), x, "n", Scale::Linear);
        let f = &c.frame;
        assert_eq!(c.x_ticks[0].at, f.left);
        assert!((c.x_ticks[1].at - f.right).abs() < 0.01);
        let m = c.marker.unwrap();
        assert!((m.x - (f.left + f.right) / 2.0).abs() < 0.01);
        assert_eq!(m.anchor, "middle");
    }

    #[test]
    fn marker_labels_near_an_edge_grow_inwards() {
        // The threshold is often the first bin edge (bins start at it) and the distance
        // marker the last: their labels must start, or end, at the line to stay drawn.
        let anchor = |at: f64| {
            let x = XAxis {
                marker: Some((at, "threshold 0.8".into())),
                ..XAxis::default()
            };
            let c = BarChart::new("c", "t", &bins(&[1; 20]), x, "n", Scale::Linear);
            c.marker.map(|m| m.anchor)
        };
        assert_eq!(anchor(0.0), Some("start"));
        assert_eq!(anchor(10.0), Some("middle"));
        assert_eq!(anchor(20.0), Some("end"));
    }

    #[test]
    fn lines_map_their_domain_onto_the_frame() {
        let series = vec![("p".into(), "a".into(), vec![(0.5, 0.0), (1.0, 1.0)])];
        let c = LineChart::new("l", "t", ("x", 0.5, 1.0, &[0.5, 1.0]), ("y", 0.0), series);
        let f = &c.frame;
        let p = &c.lines[0].points;
        assert_eq!((p[0].x, p[0].y), (f.left, f.bottom));
        assert_eq!((p[1].x, p[1].y), (f.right, f.top));
        assert_eq!(c.y_ticks.first().map(|t| t.label.as_str()), Some("0.0"));
        assert_eq!(c.y_ticks.last().map(|t| t.label.as_str()), Some("1.0"));
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt4(0.8), "0.8");
        assert_eq!(fmt4(1.0), "1");
        assert_eq!(fmt4(0.12345), "0.1235");
        assert_eq!(count_label(20000.0), "20k");
        assert_eq!(count_label(3e6), "3M");
        assert_eq!(compact(9999), "9999");
        assert_eq!(compact(63_022), "63k");
        assert_eq!(compact(1_250_000), "1.3M");
        assert_eq!(nice_step(0.17), 0.2);
        assert_eq!(nice_step(3.0), 5.0);
    }
}
