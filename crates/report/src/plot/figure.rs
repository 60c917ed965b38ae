//! A picture as data — a [`Figure`] of [`Panel`]s of [`Series`] — and the one renderer that draws it, with
//! plotters, as SVG (text as `<text>`) and as PNG (text rasterised from the DejaVu Sans compiled into the
//! binary, so no system font or font library is needed). Every picture goes through this one renderer, so titles,
//! axis labels, legends and stage lines look the same everywhere and are fixed in one place.
//!
//! The legend is drawn beside the plot, never over it, and long labels are cut to fit.

use std::collections::HashMap;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use super::PlotError;
use super::text::GlyphBackend;

/// DejaVu Sans 2.37 (see `assets/fonts/LICENSE-DejaVu.txt`): PNG text needs glyphs, and a server image has no
/// fonts to look up.
const FONT_BYTES: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// The family name the font is registered under. The SVG backend writes it as the `font-family` attribute, so
/// it is also a CSS font list: a browser with DejaVu Sans uses it (and the legend widths, measured with it, fit
/// exactly), others their sans-serif.
const FONT: &str = "DejaVu Sans, sans-serif";

const HEADER_HEIGHT: u32 = 70;
const TITLE_SIZE: f64 = 26.0;
const SUBTITLE_SIZE: f64 = 17.0;
const PANEL_TITLE_SIZE: f64 = 20.0;
const NOTE_SIZE: f64 = 15.0;
const AXIS_DESC_SIZE: f64 = 18.0;
const TICK_SIZE: f64 = 15.0;
const LEGEND_SIZE: f64 = 15.0;
const RULE_LABEL_SIZE: f64 = 14.0;

const INK: RGBColor = RGBColor(33, 33, 33);
const GREY: RGBColor = RGBColor(110, 110, 110);
const RULE: RGBColor = RGBColor(150, 150, 150);

/// An sRGB colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour(pub u8, pub u8, pub u8);

impl Colour {
    fn rgb(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }
}

/// Tableau 10: ten colours told apart by most readers, colour-blind ones included.
pub(crate) const PALETTE: [Colour; 10] = [
    Colour(78, 121, 167),
    Colour(242, 142, 43),
    Colour(225, 87, 89),
    Colour(118, 183, 178),
    Colour(89, 161, 79),
    Colour(237, 201, 72),
    Colour(176, 122, 161),
    Colour(255, 157, 167),
    Colour(156, 117, 95),
    Colour(186, 176, 172),
];

/// The `i`th colour of the palette, cycling.
pub fn colour(i: usize) -> Colour {
    PALETTE[i % PALETTE.len()]
}

/// Failures: red in every picture.
pub const FAILED: Colour = Colour(214, 39, 40);

/// One picture: a header naming what it shows and which run(s), and panels in a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The file stem: `<name>.png`, `<name>.svg`.
    pub name: String,
    /// What the picture shows, e.g. `TTFT distribution`.
    pub title: String,
    /// Which run(s): run id, harness, profile.
    pub subtitle: String,
    /// Panels per row.
    pub columns: usize,
    /// The size of one panel, in pixels.
    pub panel_size: (u32, u32),
    pub panels: Vec<Panel>,
}

impl Figure {
    /// The picture's size in pixels: the header over the grid of panels.
    pub fn size(&self) -> (u32, u32) {
        let columns = self.columns.clamp(1, self.panels.len().max(1));
        let rows = self.panels.len().div_ceil(columns).max(1);
        (
            self.panel_size.0 * columns as u32,
            HEADER_HEIGHT + self.panel_size.1 * rows as u32,
        )
    }
}

/// One plot: axes, series, vertical rules (stage boundaries, percentiles) and an optional note under its title.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Panel {
    pub title: String,
    /// A line under the title: what was left out, how a value is defined.
    pub note: Option<String>,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Vertical lines across the plot, each labelled at its top.
    pub rules: Vec<Rule>,
}

/// An axis: its label (with the unit) and how its range is chosen.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Axis {
    pub label: String,
    /// A fixed range; otherwise the data's.
    pub range: Option<(f64, f64)>,
    /// The range starts at 0 (rates, counts, latencies over time).
    pub from_zero: bool,
    /// Ticks only at whole numbers (stage indexes).
    pub integer: bool,
    /// A categorical axis: the `i`th name sits at `i`, and the ticks are the names (an experiment factor whose
    /// levels are not numbers). Empty for a numeric axis.
    pub categories: Vec<String>,
}

impl Axis {
    pub fn new(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            ..Axis::default()
        }
    }

    pub fn from_zero(mut self) -> Axis {
        self.from_zero = true;
        self
    }

    pub fn range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }

    pub fn integer(mut self) -> Axis {
        self.integer = true;
        self
    }

    /// A categorical axis of these names, at 0, 1, 2, ….
    pub fn categories(mut self, names: Vec<String>) -> Axis {
        self.categories = names;
        self
    }

    /// The tick text at `v`: the category there, or nothing between categories.
    fn category_at(&self, v: f64) -> String {
        let i = v.round();
        if (v - i).abs() > 1e-6 || i < 0.0 {
            return String::new();
        }
        self.categories.get(i as usize).cloned().unwrap_or_default()
    }
}

/// A vertical line at `at` on the x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub at: f64,
    pub label: String,
    /// The label where the full one does not fit (`p99` for `p99 51.1`, `3` for `stage 3`).
    pub short: String,
    /// Its colour; grey when `None`.
    pub colour: Option<Colour>,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Style {
    /// A line through the points, in their order; dashed, with a marker on each point.
    Line { dashed: bool, markers: bool },
    /// Dots of this radius, half transparent, so dense regions read darker.
    Points { radius: u32 },
    /// A bar from 0 to each point's y, `width` wide in x units, centred on its x.
    Bars { width: f64 },
    /// Solid marks of this shape, `size` pixels from centre to edge: points that each mean something (a search
    /// point that passed or failed, a treatment), unlike the translucent dots of a scatter.
    Marks { shape: Shape, size: u32 },
}

/// The shape of a mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    /// An ×: told apart from a circle without its colour.
    Cross,
    /// A filled triangle, pointing up.
    Triangle,
}

/// A named set of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Its legend entry.
    pub label: String,
    pub colour: Colour,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
    /// Text beside each point (e.g. its stage index); empty for none.
    pub point_labels: Vec<String>,
    /// A vertical error bar `(low, high)` per point (the spread of a treatment's repeats); empty for none.
    pub error_bars: Vec<(f64, f64)>,
}

impl Series {
    pub fn line(label: impl Into<String>, colour: Colour, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            colour,
            style: Style::Line {
                dashed: false,
                markers: false,
            },
            points,
            point_labels: Vec::new(),
            error_bars: Vec::new(),
        }
    }

    pub fn points(label: impl Into<String>, colour: Colour, points: Vec<(f64, f64)>) -> Series {
        Series {
            style: Style::Points { radius: 2 },
            ..Series::line(label, colour, points)
        }
    }

    pub fn bars(
        label: impl Into<String>,
        colour: Colour,
        width: f64,
        points: Vec<(f64, f64)>,
    ) -> Series {
        Series {
            style: Style::Bars { width },
            ..Series::line(label, colour, points)
        }
    }

    pub(crate) fn dashed(mut self) -> Series {
        if let Style::Line { dashed, .. } = &mut self.style {
            *dashed = true;
        }
        self
    }

    pub fn markers(mut self) -> Series {
        if let Style::Line { markers, .. } = &mut self.style {
            *markers = true;
        }
        self
    }

    /// Marks of `shape` at the points.
    pub fn marks(
        label: impl Into<String>,
        colour: Colour,
        shape: Shape,
        points: Vec<(f64, f64)>,
    ) -> Series {
        Series {
            style: Style::Marks { shape, size: 6 },
            ..Series::line(label, colour, points)
        }
    }

    pub fn labelled(mut self, labels: Vec<String>) -> Series {
        self.point_labels = labels;
        self
    }

    /// An error bar `(low, high)` per point, in the same order.
    pub(crate) fn error_bars(mut self, bars: Vec<(f64, f64)>) -> Series {
        self.error_bars = bars;
        self
    }
}

/// The figure as an SVG document.
pub(crate) fn render_svg(figure: &Figure) -> Result<String, PlotError> {
    register()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, figure.size()).into_drawing_area();
        draw_figure(&root, figure)
            .and_then(|()| root.present())
            .map_err(|e| draw_error(figure, e))?;
    }
    Ok(out)
}

/// The figure as a PNG file's bytes (8-bit indexed, see [`encode_indexed`]), its text drawn by
/// `text::GlyphBackend`.
pub(crate) fn render_png(figure: &Figure) -> Result<Vec<u8>, PlotError> {
    register()?;
    let (width, height) = figure.size();
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let backend = GlyphBackend::new(
            BitMapBackend::with_buffer(&mut rgb, (width, height)),
            FONT_BYTES,
        )
        .ok_or(PlotError::Font)?;
        let root = backend.into_drawing_area();
        draw_figure(&root, figure)
            .and_then(|()| root.present())
            .map_err(|e| draw_error(figure, e))?;
    }
    encode_indexed(&rgb, width, height).map_err(|e| PlotError::EncodePng {
        figure: figure.name.clone(),
        message: e.to_string(),
    })
}

/// At most this many colours in a PNG's palette: the most an 8-bit indexed PNG holds.
const PALETTE_SIZE: usize = 256;

/// `rgb` (8-bit RGB, row by row) as an indexed PNG. A picture of flat colours
/// compresses well as RGB only at a cost; as palette indexes it is a third of the data and a fraction of
/// the file (a 1520 × 950 figure: 948 kB as fast-deflated RGB, 26 kB indexed). The palette is the picture's
/// [`PALETTE_SIZE`] most frequent colours, so a figure of fewer colours is exact; beyond that, the rare
/// anti-aliasing and translucency blends take the nearest palette colour, which no reader can tell apart.
fn encode_indexed(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, png::EncodingError> {
    // Runs of one colour, so each run is looked up once: a figure is mostly long runs of white and of fills
    // (and the lookups, generic code, are not optimised in a debug build, which the tests run).
    let mut runs: Vec<([u8; 3], usize)> = Vec::new();
    for pixel in rgb.chunks_exact(3) {
        let colour = [pixel[0], pixel[1], pixel[2]];
        match runs.last_mut() {
            Some((last, n)) if *last == colour => *n += 1,
            _ => runs.push((colour, 1)),
        }
    }
    let mut counts: HashMap<[u8; 3], usize> = HashMap::new();
    for (colour, n) in &runs {
        *counts.entry(*colour).or_default() += n;
    }
    let mut by_count: Vec<([u8; 3], usize)> = counts.into_iter().collect();
    // Most frequent first; equal counts by colour, so the same picture always gives the same file.
    by_count.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let palette: Vec<[u8; 3]> = by_count
        .iter()
        .take(PALETTE_SIZE)
        .map(|(c, _)| *c)
        .collect();
    let index: HashMap<[u8; 3], u8> = by_count
        .iter()
        .map(|(c, _)| (*c, nearest(&palette, *c)))
        .collect();
    let mut indexes: Vec<u8> = Vec::with_capacity(rgb.len() / 3);
    for (colour, n) in &runs {
        let i = index.get(colour).copied().unwrap_or(0);
        indexes.extend(std::iter::repeat_n(i, *n));
    }
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Indexed);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_palette(palette.concat());
    // Deflate's default level: as small as its best on these pictures (within 0.5 %), in a third of the time.
    encoder.set_compression(png::Compression::Default);
    // Palette indexes do not predict from their neighbours as intensities do: unfiltered rows deflate best.
    encoder.set_filter(png::FilterType::NoFilter);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&indexes)?;
    writer.finish()?;
    Ok(bytes)
}

/// The index of the palette colour closest to `colour` (squared RGB distance; the first of equals).
fn nearest(palette: &[[u8; 3]], colour: [u8; 3]) -> u8 {
    let distance = |p: &[u8; 3]| -> i32 {
        (0..3)
            .map(|i| (i32::from(p[i]) - i32::from(colour[i])).pow(2))
            .sum()
    };
    let best = (0..palette.len())
        .min_by_key(|&i| distance(&palette[i]))
        .unwrap_or(0);
    u8::try_from(best).unwrap_or(u8::MAX)
}

fn draw_error<E: std::error::Error + Send + Sync>(
    figure: &Figure,
    error: DrawingAreaErrorKind<E>,
) -> PlotError {
    PlotError::Draw {
        figure: figure.name.clone(),
        message: error.to_string(),
    }
}

/// Registers the embedded font once per process.
fn register() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok());
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

fn font(size: f64) -> TextStyle<'static> {
    TextStyle::from((FONT, size).into_font()).color(&INK)
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw_figure<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    figure: &Figure,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_HEIGHT);
    header.draw_text(&figure.title, &font(TITLE_SIZE), (18, 10))?;
    header.draw_text(
        &figure.subtitle,
        &font(SUBTITLE_SIZE).color(&GREY),
        (18, 44),
    )?;
    let columns = figure.columns.clamp(1, figure.panels.len().max(1));
    let rows = figure.panels.len().div_ceil(columns).max(1);
    let cells = body.split_evenly((rows, columns));
    // Every panel gets the widest legend and tick labels of the figure, so plots stacked over each other share
    // their x positions: a stage line or a spike at 40 s is at the same pixel in every panel.
    let gutters = cells
        .iter()
        .zip(&figure.panels)
        .map(|(cell, panel)| gutters(cell, panel))
        .fold(Gutters::default(), |a, b| Gutters {
            legend: a.legend.max(b.legend),
            labels: a.labels.max(b.labels),
            y_labels: a.y_labels.max(b.y_labels),
        });
    // Once one panel needs a legend, every panel's legend fits, lone series included.
    let gutters = Gutters {
        legend: if gutters.legend > 0 {
            gutters.labels
        } else {
            0
        },
        ..gutters
    };
    for (cell, panel) in cells.iter().zip(&figure.panels) {
        draw_panel(cell, panel, gutters)?;
    }
    Ok(())
}

/// The widths a panel needs beside its plot: its legend's (0 for one series), what a legend of its series would
/// take (one series included), and its y tick labels'.
#[derive(Debug, Clone, Copy, Default)]
struct Gutters {
    legend: u32,
    labels: u32,
    y_labels: u32,
}

fn gutters<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> Gutters {
    let width = area.dim_in_pixel().0;
    let entries: Vec<&Series> = panel
        .series
        .iter()
        .filter(|s| !s.label.is_empty())
        .collect();
    let widest = entries
        .iter()
        .map(|s| text_width(area, &s.label, LEGEND_SIZE))
        .max()
        .unwrap_or(0);
    let labels = (widest + 50).min(width * 2 / 5);
    let legend = if entries.len() > 1 { labels } else { 0 };
    let (_, (y0, y1)) = panel_ranges(panel);
    let y_labels = [y0, (y0 + y1) / 2.0, y1]
        .iter()
        .map(|&v| text_width(area, &tick_label(v, y1 - y0), TICK_SIZE))
        .max()
        .unwrap_or(30)
        + 38;
    Gutters {
        legend,
        labels,
        y_labels,
    }
}

/// The x and y ranges a panel draws: fixed where its axes say, else the data's (bars' full width, rules too),
/// with a margin so markers at the edges are not cut.
pub(crate) fn panel_ranges(panel: &Panel) -> ((f64, f64), (f64, f64)) {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    let mut bars = false;
    let mut markers = false;
    for series in &panel.series {
        for &(x, y) in series.points.iter().filter(finite) {
            match series.style {
                Style::Bars { width } => {
                    bars = true;
                    markers = true;
                    xs.extend([x - width / 2.0, x + width / 2.0]);
                }
                Style::Points { .. } | Style::Marks { .. } | Style::Line { markers: true, .. } => {
                    markers = true;
                    xs.push(x);
                }
                Style::Line { .. } => xs.push(x),
            }
            ys.push(y);
        }
        for &(low, high) in &series.error_bars {
            ys.extend([low, high].into_iter().filter(|v| v.is_finite()));
        }
    }
    xs.extend(panel.rules.iter().map(|r| r.at).filter(|x| x.is_finite()));
    // Categories sit at 0 … n − 1, half a step in from either edge.
    let categories =
        (!panel.x.categories.is_empty()).then(|| (-0.5, panel.x.categories.len() as f64 - 0.5));
    let x = panel
        .x
        .range
        .or(categories)
        .unwrap_or_else(|| span(&xs, panel.x.from_zero, if markers { 0.04 } else { 0.0 }));
    // Bars grow from 0; counts and rates read wrong from any other baseline.
    let y = panel
        .y
        .range
        .unwrap_or_else(|| span(&ys, panel.y.from_zero || bars, 0.06));
    (x, y)
}

/// `[min, max]` of the values (from 0 if asked), widened by `pad` of the span at the top (and at the bottom
/// unless it is 0), and opened up around a single value.
fn span(values: &[f64], from_zero: bool, pad: f64) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !(lo.is_finite() && hi.is_finite()) {
        return (0.0, 1.0);
    }
    let lo = if from_zero { lo.min(0.0) } else { lo };
    if hi <= lo {
        // One value (0, when from zero): 10 % either side of it, or ±1 around 0.
        let half = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        return if from_zero && lo >= 0.0 {
            (0.0, lo + 2.0 * half)
        } else {
            (lo - half, hi + half)
        };
    }
    let margin = (hi - lo) * pad;
    let bottom = if from_zero && lo == 0.0 {
        0.0
    } else {
        lo - margin
    };
    (bottom, hi + margin)
}

/// A tick label for `v` on an axis spanning `span`: as few decimals as tell the ticks apart (ticks are a nice
/// step of about an eighth of the span apart), more if `v` needs them, and thousands as `k`, millions as `M`.
pub(crate) fn tick_label(v: f64, span: f64) -> String {
    let (scaled, scaled_span, suffix) = match span.abs() {
        s if s >= 1e7 => (v / 1e6, span / 1e6, "M"),
        s if s >= 1e4 => (v / 1e3, span / 1e3, "k"),
        _ => (v, span, ""),
    };
    let step = super::math::nice_step(scaled_span.abs() / 8.0);
    let mut decimals = (-step.log10().floor()).clamp(0.0, 6.0) as usize;
    // A tick off the step's grid (plotters may choose a finer one) keeps the decimals it needs.
    while decimals < 6 {
        let shown: f64 = format!("{scaled:.decimals$}").parse().unwrap_or(scaled);
        if (shown - scaled).abs() <= step * 1e-3 {
            break;
        }
        decimals += 1;
    }
    let text = format!("{scaled:.decimals$}");
    // Zero is "0" whatever the scale: "-0" and "0k" read as other numbers.
    if text
        .trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        return "0".to_owned();
    }
    format!("{text}{suffix}")
}

fn text_width<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, text: &str, size: f64) -> u32 {
    area.estimate_text_size(text, &font(size))
        .map(|(w, _)| w)
        .unwrap_or((text.chars().count() as f64 * size * 0.5) as u32)
}

/// `text` cut (with an ellipsis) to at most `max` pixels wide.
fn fit<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: f64,
    max: u32,
) -> String {
    if text_width(area, text, size) <= max {
        return text.to_owned();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let candidate: String = chars.iter().collect::<String>() + "…";
        if text_width(area, &candidate, size) <= max {
            return candidate;
        }
    }
    "…".to_owned()
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    gutters: Gutters,
) -> DrawResult<DB> {
    let area = area.margin(4, 8, 8, 8);

    // Title and note over the plot, drawn here rather than as plotters' caption so the note can sit under it.
    let title_height = if panel.note.is_some() { 50 } else { 30 };
    let (top, rest) = area.split_vertically(title_height);
    let centre = (top.dim_in_pixel().0 / 2) as i32;
    let centred = |size: f64| {
        font(size).pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Top,
        ))
    };
    let max_text = top.dim_in_pixel().0.saturating_sub(20);
    top.draw_text(
        &fit(&top, &panel.title, PANEL_TITLE_SIZE, max_text),
        &centred(PANEL_TITLE_SIZE),
        (centre, 4),
    )?;
    if let Some(note) = &panel.note {
        top.draw_text(
            &fit(&top, note, NOTE_SIZE, max_text),
            &centred(NOTE_SIZE).color(&GREY),
            (centre, 30),
        )?;
    }

    let entries: Vec<&Series> = panel
        .series
        .iter()
        .filter(|s| !s.label.is_empty())
        .collect();
    let legend_width = gutters.legend;
    let plot_width = rest.dim_in_pixel().0.saturating_sub(legend_width);
    let (plot_area, legend_area) = rest.split_horizontally(plot_width);

    let ((x0, x1), (y0, y1)) = panel_ranges(panel);
    let (x_span, y_span) = (x1 - x0, y1 - y0);
    let y_label_width = gutters.y_labels;
    // An integer axis labels whole numbers only (plotters may put ticks between them).
    let label = |integer: bool, v: f64, span: f64| {
        if !integer {
            tick_label(v, span)
        } else if (v - v.round()).abs() > 1e-6 {
            String::new()
        } else {
            format!("{v:.0}")
        }
    };
    let x_format = |v: &f64| {
        if panel.x.categories.is_empty() {
            label(panel.x.integer, *v, x_span)
        } else {
            panel.x.category_at(*v)
        }
    };
    let y_format = |v: &f64| label(panel.y.integer, *v, y_span);

    let mut chart = ChartBuilder::on(&plot_area)
        .margin_top(8)
        .margin_right(18)
        .margin_bottom(4)
        .x_label_area_size(54)
        .y_label_area_size(y_label_width)
        .build_cartesian_2d(x0..x1, y0..y1)?;
    let labels = |integer: bool, span: f64| {
        if integer {
            (span.round() as usize + 1).clamp(2, 12)
        } else {
            8
        }
    };
    let (x_labels, y_labels) = (
        labels(panel.x.integer || !panel.x.categories.is_empty(), x_span),
        labels(panel.y.integer, y_span),
    );
    chart
        .configure_mesh()
        .x_desc(panel.x.label.as_str())
        .y_desc(panel.y.label.as_str())
        .x_labels(x_labels)
        .y_labels(y_labels)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .axis_desc_style(font(AXIS_DESC_SIZE))
        .label_style(font(TICK_SIZE))
        .light_line_style(RGBColor(245, 245, 245))
        .bold_line_style(RGBColor(225, 225, 225))
        .axis_style(GREY)
        .draw()?;

    for series in &panel.series {
        draw_series(&mut chart, series, (x0, x1), (y0, y1))?;
    }
    draw_rules(&mut chart, panel, (x0, x1), (y0, y1))?;
    // A lone series gets a legend too when the figure has room for legends (a server panel's one metric).
    if !entries.is_empty() && legend_width > 0 {
        draw_legend(&legend_area, &entries)?;
    }
    Ok(())
}

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_series<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    series: &Series,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> DrawResult<DB> {
    let colour = series.colour.rgb();
    let inside = |&(x, y): &(f64, f64)| {
        x.is_finite() && y.is_finite() && x >= x0 && x <= x1 && y >= y0 && y <= y1
    };
    let points: Vec<(f64, f64)> = series.points.iter().copied().filter(inside).collect();
    match series.style {
        Style::Line { dashed, markers } => {
            let style = colour.stroke_width(2);
            // A point with no y (NaN) is a gap: the line stops there rather than bridging time with no data.
            for run in series.points.split(|(_, y)| y.is_nan()) {
                let run = run.iter().copied().filter(inside);
                if dashed {
                    chart.draw_series(DashedLineSeries::new(run, 9, 6, style))?;
                } else {
                    chart.draw_series(LineSeries::new(run, style))?;
                }
            }
            if markers {
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
            }
        }
        Style::Points { radius } => {
            // Few small dots are drawn larger, so five requests do not vanish behind two lines.
            let radius = match points.len() {
                _ if radius > 2 => radius,
                0..=200 => radius + 2,
                201..=2000 => radius + 1,
                _ => radius,
            };
            chart.draw_series(
                points
                    .iter()
                    .map(|&p| Circle::new(p, radius, colour.mix(0.55).filled())),
            )?;
        }
        Style::Bars { width } => {
            let base = y0.max(0.0);
            chart.draw_series(points.iter().map(|&(x, y)| {
                let left = (x - width / 2.0).max(x0);
                let right = (x + width / 2.0).min(x1);
                Rectangle::new([(left, base), (right, y)], colour.mix(0.85).filled())
            }))?;
        }
        Style::Marks { shape, size } => match shape {
            Shape::Circle => {
                chart.draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, size, colour.filled())),
                )?;
            }
            Shape::Triangle => {
                chart.draw_series(
                    points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, size + 1, colour.filled())),
                )?;
            }
            Shape::Cross => {
                // Two strokes, in pixels around the point, so the × keeps its shape on any scale.
                let r = size as i32;
                let stroke = colour.stroke_width(3);
                chart.draw_series(points.iter().map(|&p| {
                    EmptyElement::at(p)
                        + PathElement::new([(-r, -r), (r, r)], stroke)
                        + PathElement::new([(-r, r), (r, -r)], stroke)
                }))?;
            }
        },
    }
    draw_error_bars(chart, series, (x0, x1), (y0, y1))?;
    if !series.point_labels.is_empty() {
        let style = font(RULE_LABEL_SIZE).color(&colour);
        chart.draw_series(
            series
                .points
                .iter()
                .zip(&series.point_labels)
                .filter(|(p, _)| inside(p))
                .map(|(&p, text)| {
                    EmptyElement::at(p) + Text::new(text.clone(), (6, -18), style.clone())
                }),
        )?;
    }
    Ok(())
}

/// Each point's error bar: a vertical line from low to high with a short cap at either end, cut to the plot.
fn draw_error_bars<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    series: &Series,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> DrawResult<DB> {
    let style = series.colour.rgb().stroke_width(2);
    for (&(x, _), &(low, high)) in series.points.iter().zip(&series.error_bars) {
        if !(x.is_finite() && low.is_finite() && high.is_finite()) || x < x0 || x > x1 {
            continue;
        }
        let (low, high) = (low.max(y0), high.min(y1));
        if low > high {
            continue;
        }
        chart.draw_series(std::iter::once(PathElement::new(
            [(x, low), (x, high)],
            style,
        )))?;
        for end in [low, high] {
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, end)) + PathElement::new([(-6, 0), (6, 0)], style),
            ))?;
        }
    }
    Ok(())
}

/// Vertical rules, labelled at their top; a label that does not fit is shortened (`stage 3` → `3`), or left out.
fn draw_rules<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    panel: &Panel,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> DrawResult<DB> {
    let rules: Vec<&Rule> = panel
        .rules
        .iter()
        .filter(|r| r.at >= x0 && r.at <= x1)
        .collect();
    let xs: Vec<i32> = rules
        .iter()
        .map(|r| chart.backend_coord(&(r.at, y1)).0)
        .collect();
    let area = chart.plotting_area().strip_coord_spec();
    let (left_end, right_end) = {
        let range = area.get_pixel_range().0;
        (range.start, range.end)
    };
    // Labels go right of their rule, or left of it when the next rule or the plot's edge leaves no room; a
    // label never reaches into the one before it.
    let mut taken = left_end;
    let mut labels = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let colour = rule.colour.map_or(RULE, Colour::rgb);
        chart.draw_series(DashedLineSeries::new(
            [(rule.at, y0), (rule.at, y1)],
            5,
            4,
            colour.stroke_width(1),
        ))?;
        let x = xs[i];
        let next = xs.get(i + 1).copied().unwrap_or(right_end) - 4;
        let mut placed = None;
        for text in [rule.label.as_str(), rule.short.as_str()] {
            let w = text_width(&area, text, RULE_LABEL_SIZE) as i32;
            if text.is_empty() {
                continue;
            }
            if x + 3 >= taken && x + 3 + w <= next {
                placed = Some((text, true, x + 3 + w));
            } else if x - 3 - w >= taken.max(left_end) {
                placed = Some((text, false, x));
            }
            if placed.is_some() {
                break;
            }
        }
        if let Some((text, right, end)) = placed {
            taken = end + 4;
            labels.push((rule.at, text.to_owned(), colour, right));
        }
    }
    for (at, text, colour, right) in labels {
        let style = font(RULE_LABEL_SIZE).color(&colour);
        let (style, offset) = if right {
            (style, (3, 2))
        } else {
            (
                style.pos(plotters::style::text_anchor::Pos::new(
                    plotters::style::text_anchor::HPos::Right,
                    plotters::style::text_anchor::VPos::Top,
                )),
                (-3, 2),
            )
        };
        chart.draw_series(std::iter::once(
            EmptyElement::at((at, y1)) + Text::new(text, offset, style),
        ))?;
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[&Series],
) -> DrawResult<DB> {
    let (width, height) = area.dim_in_pixel();
    let row = 24i32;
    let max_rows = ((height as i32 - 20) / row).max(1) as usize;
    let shown = if entries.len() > max_rows {
        max_rows - 1
    } else {
        entries.len()
    };
    let text_room = width.saturating_sub(44);
    for (i, series) in entries.iter().take(shown).enumerate() {
        let y = 16 + i as i32 * row;
        let colour = series.colour.rgb();
        match series.style {
            Style::Line { dashed, markers } => {
                if dashed {
                    for k in 0..3 {
                        area.draw(&PathElement::new(
                            [(6 + k * 9, y + 9), (12 + k * 9, y + 9)],
                            colour.stroke_width(2),
                        ))?;
                    }
                } else {
                    area.draw(&PathElement::new(
                        [(6, y + 9), (30, y + 9)],
                        colour.stroke_width(2),
                    ))?;
                }
                if markers {
                    area.draw(&Circle::new((18, y + 9), 4, colour.filled()))?;
                }
            }
            Style::Points { .. } => area.draw(&Circle::new((18, y + 9), 4, colour.filled()))?,
            Style::Bars { .. } => area.draw(&Rectangle::new(
                [(8, y + 2), (28, y + 16)],
                colour.mix(0.85).filled(),
            ))?,
            Style::Marks { shape, size } => {
                let r = size.min(6) as i32;
                match shape {
                    Shape::Circle => {
                        area.draw(&Circle::new((18, y + 9), r as u32, colour.filled()))?
                    }
                    Shape::Triangle => area.draw(&TriangleMarker::new(
                        (18, y + 9),
                        r as u32 + 1,
                        colour.filled(),
                    ))?,
                    Shape::Cross => {
                        let stroke = colour.stroke_width(3);
                        area.draw(&PathElement::new(
                            [(18 - r, y + 9 - r), (18 + r, y + 9 + r)],
                            stroke,
                        ))?;
                        area.draw(&PathElement::new(
                            [(18 - r, y + 9 + r), (18 + r, y + 9 - r)],
                            stroke,
                        ))?;
                    }
                }
            }
        }
        area.draw_text(
            &fit(area, &series.label, LEGEND_SIZE, text_room),
            &font(LEGEND_SIZE),
            (38, y),
        )?;
    }
    if shown < entries.len() {
        let y = 16 + shown as i32 * row;
        area.draw_text(
            &format!("+{} more", entries.len() - shown),
            &font(LEGEND_SIZE).color(&GREY),
            (38, y),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_have_the_decimals_their_spacing_needs() {
        // Span 1000: step nice(125) = 200 → no decimals.
        assert_eq!(tick_label(250.0, 1000.0), "250");
        // Span 5.5: step nice(0.69) = 1 → no decimals.
        assert_eq!(tick_label(3.0, 5.5), "3");
        // Span 4: step 0.5 → one decimal.
        assert_eq!(tick_label(2.5, 4.0), "2.5");
        assert_eq!(tick_label(2.0, 4.0), "2.0");
        // Span 1.6: step 0.2 → one decimal, but a tick at 0.25 keeps its second.
        assert_eq!(tick_label(0.25, 1.6), "0.25");
        // Span 0.05: step nice(0.00625) = 0.01 → two decimals, three for 0.015.
        assert_eq!(tick_label(0.02, 0.05), "0.02");
        assert_eq!(tick_label(0.015, 0.05), "0.015");
        // Span 20 000: in thousands, step 2.5k → none needed for 12k, one for 12.5k.
        assert_eq!(tick_label(12_000.0, 20_000.0), "12k");
        assert_eq!(tick_label(12_500.0, 20_000.0), "12.5k");
        // Span 5 M: thousands, step 1000k.
        assert_eq!(tick_label(2_000_000.0, 5_000_000.0), "2000k");
        assert_eq!(tick_label(30_000_000.0, 50_000_000.0), "30M");
        assert_eq!(tick_label(-0.0001, 10.0), "0");
        assert_eq!(tick_label(0.0, 20_000.0), "0");
    }

    fn panel(series: Vec<Series>) -> Panel {
        Panel {
            series,
            ..Panel::default()
        }
    }

    #[test]
    fn ranges_cover_the_data_with_a_margin_on_y() {
        // Line over x 0 … 10, y 2 … 12: x exact (a line has no markers to cut), y widened by 6 % of 10 = 0.6.
        let p = panel(vec![Series::line(
            "a",
            colour(0),
            vec![(0.0, 2.0), (10.0, 12.0)],
        )]);
        let ((x0, x1), (y0, y1)) = panel_ranges(&p);
        assert_eq!((x0, x1), (0.0, 10.0));
        assert!((y0 - 1.4).abs() < 1e-9 && (y1 - 12.6).abs() < 1e-9);
    }

    #[test]
    fn bars_start_at_zero_and_include_their_width() {
        // Bars 1 wide at x 0 and 3: x from −0.5 to 3.5, widened by 4 % of 4 = 0.16 so the outer bars do not
        // touch the axes; y from 0 to 4 + 6 %.
        let p = panel(vec![Series::bars(
            "a",
            colour(0),
            1.0,
            vec![(0.0, 2.0), (3.0, 4.0)],
        )]);
        let ((x0, x1), (y0, y1)) = panel_ranges(&p);
        assert!((x0 + 0.66).abs() < 1e-9 && (x1 - 3.66).abs() < 1e-9 && y0 == 0.0);
        assert!((y1 - 4.24).abs() < 1e-9);
    }

    #[test]
    fn a_single_value_or_no_data_still_gives_a_drawable_range() {
        assert_eq!(span(&[], false, 0.0), (0.0, 1.0));
        // One value 50: ±10 %.
        assert_eq!(span(&[50.0], false, 0.0), (45.0, 55.0));
        // From zero: 0 to the value.
        assert_eq!(span(&[50.0], true, 0.0), (0.0, 50.0));
        assert_eq!(span(&[0.0], true, 0.0), (0.0, 2.0));
    }

    #[test]
    fn figure_size_is_the_header_over_the_grid() {
        let figure = Figure {
            name: "x".into(),
            title: String::new(),
            subtitle: String::new(),
            columns: 2,
            panel_size: (800, 500),
            panels: vec![Panel::default(); 3],
        };
        // 3 panels in 2 columns: 2 rows.
        assert_eq!(figure.size(), (1600, HEADER_HEIGHT + 1000));
    }

    /// Decodes a PNG to 8-bit RGB (expanding a palette).
    fn decode_rgb(png: &[u8]) -> (png::ColorType, Vec<u8>) {
        let mut decoder = png::Decoder::new(std::io::Cursor::new(png));
        decoder.set_transformations(png::Transformations::EXPAND);
        let mut reader = decoder.read_info().unwrap();
        let stored = reader.info().color_type;
        let mut pixels = vec![0; reader.output_buffer_size()];
        let frame = reader.next_frame(&mut pixels).unwrap();
        pixels.truncate(frame.buffer_size());
        (stored, pixels)
    }

    #[test]
    fn a_png_of_few_colours_is_indexed_and_exact() {
        // Three colours, 4 × 2 pixels.
        let (r, g, w) = ([255, 0, 0], [0, 128, 0], [255, 255, 255]);
        let rgb: Vec<u8> = [w, w, r, g, w, w, g, w].concat();
        let png = encode_indexed(&rgb, 4, 2).unwrap();
        let (stored, pixels) = decode_rgb(&png);
        assert_eq!(stored, png::ColorType::Indexed);
        assert_eq!(pixels, rgb);
    }

    #[test]
    fn a_png_of_more_than_256_colours_keeps_the_frequent_ones_and_moves_the_rest_to_the_nearest() {
        // The 256 greys (v, v, v) twice each, and 44 near-greys (v, v, v + 1) once: the greys make the palette
        // and are kept exactly; each near-grey takes its grey, one step away.
        let grey = |v: u8| [v, v, v];
        let mut drawn: Vec<[u8; 3]> = (0..=255).chain(0..=255).map(grey).collect();
        drawn.extend((0..44).map(|v| [v, v, v + 1]));
        let rgb = drawn.concat();
        let png = encode_indexed(&rgb, drawn.len() as u32, 1).unwrap();
        let (stored, decoded) = decode_rgb(&png);
        assert_eq!(stored, png::ColorType::Indexed);
        let expected: Vec<u8> = (0..=255)
            .chain(0..=255)
            .chain(0..44)
            .flat_map(grey)
            .collect();
        assert_eq!(decoded, expected);
        assert_eq!(
            nearest(&[[0, 0, 0], [10, 10, 10], [20, 20, 20]], [14, 14, 14]),
            1
        );
    }

    #[test]
    fn a_categorical_axis_puts_its_names_at_whole_positions_half_a_step_in_from_the_edges() {
        let axis = Axis::new("dtype").categories(vec!["fp8".into(), "bf16".into()]);
        assert_eq!(axis.category_at(0.0), "fp8");
        assert_eq!(axis.category_at(1.0), "bf16");
        assert_eq!(axis.category_at(0.5), "");
        assert_eq!(axis.category_at(2.0), "");
        let p = Panel {
            x: axis,
            ..panel(vec![Series::marks(
                "a",
                colour(0),
                Shape::Circle,
                vec![(0.0, 1.0), (1.0, 2.0)],
            )])
        };
        assert_eq!(panel_ranges(&p).0, (-0.5, 1.5));
    }

    #[test]
    fn error_bars_widen_the_y_range_to_their_ends() {
        // Points at y 10 and 20, bars down to 4 and up to 30: y spans 4 … 30, widened by 6 % of 26.
        let p = panel(vec![
            Series::line("a", colour(0), vec![(0.0, 10.0), (1.0, 20.0)])
                .error_bars(vec![(4.0, 12.0), (18.0, 30.0)]),
        ]);
        let (_, (y0, y1)) = panel_ranges(&p);
        assert!(
            (y0 - (4.0 - 1.56)).abs() < 1e-9 && (y1 - 31.56).abs() < 1e-9,
            "{y0} {y1}"
        );
    }

    #[test]
    fn svg_and_png_render_with_the_embedded_font() {
        let figure = Figure {
            name: "test".into(),
            title: "A <title> & more".into(),
            subtitle: "run r".into(),
            columns: 1,
            panel_size: (600, 400),
            panels: vec![panel(vec![
                Series::line("p50", colour(0), vec![(0.0, 1.0), (1.0, 2.0)])
                    .markers()
                    .error_bars(vec![(0.5, 1.5), (1.8, 2.2)]),
                Series::points("requests", colour(1), vec![(0.5, 1.5)]),
                Series::marks("passed", colour(4), Shape::Circle, vec![(0.2, 1.2)]),
                Series::marks("failed", FAILED, Shape::Cross, vec![(0.8, 1.8)]),
            ])],
        };
        let svg = render_svg(&figure).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("A &lt;title&gt; &amp; more"));
        assert!(svg.contains("font-family=\"DejaVu Sans, sans-serif\""));
        let png = render_png(&figure).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let reader = decoder.read_info().unwrap();
        assert_eq!(
            (reader.info().width, reader.info().height),
            (600, 400 + HEADER_HEIGHT)
        );
    }
}
