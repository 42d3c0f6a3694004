//! The replay as a chart: context tokens per request for each policy (where a policy fires, its
//! line drops) above the cumulative cost of each, its legend with what each policy's requests
//! kept ([`crate::retention`]). SVG, or the same SVG in a self-contained HTML
//! page.

use plotters::prelude::*;

use crate::ReplayError;
use crate::run::{Replay, RowKind};

/// Colours that stay apart on a white page, one per policy in order.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
];

/// The chart of `replay` as an SVG document.
pub fn svg(replay: &Replay, title: &str) -> Result<String, ReplayError> {
    let mut out = String::new();
    draw(replay, title, &mut out).map_err(|error| ReplayError::Plot(error.to_string()))?;
    Ok(out)
}

/// The chart in an HTML page that needs nothing else (no script, no network).
pub fn html(replay: &Replay, title: &str) -> Result<String, ReplayError> {
    let chart = svg(replay, title)?;
    let escaped = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    Ok(format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{escaped}</title></head>\n<body style=\"font-family: sans-serif\">\n{chart}\n</body></html>\n"
    ))
}

fn draw(replay: &Replay, title: &str, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let requests = replay.agent_requests.max(1);
    let peak = replay
        .policies
        .iter()
        .map(|policy| policy.peak_context_tokens)
        .max()
        .unwrap_or(0)
        .max(replay.context_window as u64)
        .max(1);
    let most = replay
        .policies
        .iter()
        .map(|policy| policy.cost_usd)
        .fold(0.0, f64::max)
        .max(0.01);
    // The chart follows the main thread; its subagents ran in contexts of their own.
    let thread = if replay.subagents.is_empty() {
        ""
    } else {
        " (main thread; subagents in the table)"
    };
    let root = SVGBackend::with_string(out, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(420);

    context_chart(&top, replay, title, thread, requests, peak)?;
    spend_chart(&bottom, replay, thread, requests, most)?;
    root.present()?;
    Ok(())
}

/// The SVG area a chart is drawn on.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The top chart: each policy's context at each request, the window, and where each fired.
fn context_chart(
    area: &Area<'_>,
    replay: &Replay,
    title: &str,
    thread: &str,
    requests: usize,
    peak: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut context = ChartBuilder::on(area)
        .caption(
            format!("{title}: context per request{thread}"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0..requests, 0..peak + peak / 20)?;
    context
        .configure_mesh()
        .x_desc("request")
        .y_desc("input tokens")
        .draw()?;
    let window = replay.context_window as u64;
    context
        .draw_series(LineSeries::new(
            [(0, window), (requests, window)],
            RGBColor(120, 120, 120).stroke_width(3),
        ))?
        .label(format!(
            "context window ({window}): above it, a request fails"
        ))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(120, 120, 120)));
    for (index, policy) in replay.policies.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        // The first policy (usually `recorded`) is drawn wider: others that match it lie on top.
        let width = if index == 0 { 5 } else { 2 };
        let points = policy
            .rows
            .iter()
            .filter(|row| row.kind == RowKind::Agent)
            .map(|row| (row.step, row.context_tokens));
        context
            .draw_series(LineSeries::new(points, colour.stroke_width(width)))?
            .label(policy.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        // A dot at each request a summary was made for: where the policy fired.
        let fired = policy
            .rows
            .iter()
            .filter(|row| row.kind == RowKind::Summarizer)
            .filter_map(|row| {
                policy
                    .rows
                    .iter()
                    .find(|agent| agent.kind == RowKind::Agent && agent.step == row.step)
                    .map(|agent| (agent.step, agent.context_tokens))
            });
        context.draw_series(fired.map(|point| Circle::new(point, 4, colour.filled())))?;
    }
    context
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}

/// The bottom chart: each policy's cumulative cost, with what it keeps in the legend.
fn spend_chart(
    area: &Area<'_>,
    replay: &Replay,
    thread: &str,
    requests: usize,
    most: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut spend = ChartBuilder::on(area)
        .caption(
            format!(
                "cumulative cost{thread}, US dollars ({}, {})",
                replay.provider, replay.model
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0..requests, 0.0..most * 1.05)?;
    spend
        .configure_mesh()
        .x_desc("request")
        .y_desc("dollars")
        .draw()?;
    for (index, policy) in replay.policies.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        let mut total = 0.0;
        let mut points = Vec::with_capacity(replay.agent_requests);
        for row in &policy.rows {
            total += row.cost_usd;
            if row.kind == RowKind::Agent {
                points.push((row.step, total));
            }
        }
        let width = if index == 0 { 5 } else { 2 };
        spend
            .draw_series(LineSeries::new(points, colour.stroke_width(width)))?
            .label(format!(
                "{} ${:.2}, keeps {:.0} % (least {:.0} %)",
                policy.name,
                policy.cost_usd,
                policy.retention * 100.0,
                policy.retention_min * 100.0
            ))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    spend
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}
