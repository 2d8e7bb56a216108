//! The report's two plots, drawn with plotters into SVG strings: the distance distributions
//! (in-domain answering chunk vs out-of-domain best chunk) and the refusal sweep.
//! Invariants: output depends only on the data (elements are drawn in a fixed order), so a
//! report regenerated from the same results is byte-identical.

use super::score::SweepRow;
use plotters::prelude::*;

const SIZE: (u32, u32) = (760, 420);
const BIN: f64 = 0.025;
const IN_DOMAIN: RGBColor = RGBColor(31, 119, 180);
const OUT_OF_DOMAIN: RGBColor = RGBColor(214, 39, 40);
const DROPPED: RGBColor = RGBColor(255, 127, 14);
const CUT: RGBColor = RGBColor(60, 60, 60);

fn draw_error<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

/// A vertical dashed marker at `cut`, labelled in the legend.
#[derive(Debug, Clone)]
pub struct Marker {
    pub at: f64,
    pub label: String,
}

/// Histograms (bins of 0.025) of the in-domain answering-chunk distances and the
/// out-of-domain best-chunk distances, overlaid, with the cut markers.
pub fn distances_svg(in_domain: &[f64], ood: &[f64], markers: &[Marker]) -> Result<String, String> {
    let all = || in_domain.iter().chain(ood).copied().filter(|d| d.is_finite());
    let lo = all().fold(0.40f64, f64::min);
    let hi = all().fold(0.80f64, f64::max);
    let first = (lo / BIN).floor() as i64;
    let last = (hi / BIN).floor() as i64 + 1;
    let bins = |values: &[f64]| {
        let mut counts = vec![0usize; (last - first).max(1) as usize];
        for &v in values.iter().filter(|d| d.is_finite()) {
            let b = ((v / BIN).floor() as i64 - first).clamp(0, counts.len() as i64 - 1);
            counts[b as usize] += 1;
        }
        counts
    };
    let (a, b) = (bins(in_domain), bins(ood));
    // Headroom above the tallest bar keeps the legend clear of the data.
    let ymax = a.iter().chain(&b).copied().max().unwrap_or(1).max(1) as f64 * 1.6;
    let x0 = first as f64 * BIN;
    let x1 = last as f64 * BIN;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Cosine distance: answering chunk (in-domain) vs best chunk (out-of-domain)", ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .build_cartesian_2d(x0..x1, 0.0..ymax)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("cosine distance (bins of 0.025)")
            .y_desc("queries")
            .x_labels(12)
            .x_label_formatter(&|x| format!("{x:.2}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(draw_error)?;
        for (counts, color, label) in
            [(&a, IN_DOMAIN, "in-domain: closest answering chunk"), (&b, OUT_OF_DOMAIN, "out-of-domain: closest chunk")]
        {
            let n: usize = counts.iter().sum();
            chart
                .draw_series(counts.iter().enumerate().filter(|(_, &c)| c > 0).map(|(i, &c)| {
                    let left = (first + i as i64) as f64 * BIN;
                    Rectangle::new([(left + 0.002, 0.0), (left + BIN - 0.002, c as f64)], color.mix(0.45).filled())
                }))
                .map_err(draw_error)?
                .label(format!("{label} (n = {n})"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.mix(0.6).filled()));
        }
        draw_markers(&mut chart, markers, ymax)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// Bluffs, refusals and dropped answers against the cut.
pub fn sweep_svg(rows: &[SweepRow], n_in_domain: usize, n_ood: usize, markers: &[Marker]) -> Result<String, String> {
    let x0 = rows.first().map_or(0.4, |r| r.cut as f64);
    let x1 = rows.last().map_or(0.8, |r| r.cut as f64).max(x0 + BIN);
    let ymax = rows.iter().map(|r| r.bluffs.max(r.refused).max(r.dropped)).max().unwrap_or(1).max(1) as f64 * 1.5;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Refusal sweep: what each cut costs", ("sans-serif", 17))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .build_cartesian_2d(x0..x1, 0.0..ymax)
            .map_err(draw_error)?;
        chart
            .configure_mesh()
            .x_desc("cut (cosine distance)")
            .y_desc("queries")
            .x_labels(9)
            .x_label_formatter(&|x| format!("{x:.3}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(draw_error)?;
        let series: [Series; 3] = [
            (format!("bluffs (of {n_ood} out-of-domain)"), OUT_OF_DOMAIN, |r| r.bluffs),
            (format!("refused (of {n_in_domain} in-domain)"), IN_DOMAIN, |r| r.refused),
            (format!("answer dropped by the gate (of {n_in_domain})"), DROPPED, |r| r.dropped),
        ];
        for (label, color, value) in series {
            let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.cut as f64, value(r) as f64)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(draw_error)?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled()))).map_err(draw_error)?;
        }
        draw_markers(&mut chart, markers, ymax)?;
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperMiddle)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    Ok(svg)
}

/// A sweep curve: its label, colour and the count it plots.
type Series = (String, RGBColor, fn(&SweepRow) -> usize);

type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

fn draw_markers(chart: &mut Chart<'_, '_>, markers: &[Marker], ymax: f64) -> Result<(), String> {
    for (i, m) in markers.iter().enumerate() {
        let style = if i == 0 { CUT.stroke_width(2) } else { CUT.mix(0.5).stroke_width(1) };
        chart
            .draw_series(DashedLineSeries::new(vec![(m.at, 0.0), (m.at, ymax)], 6, 4, style))
            .map_err(draw_error)?
            .label(m.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_plots_render_deterministic_svg() {
        let markers = [Marker { at: 0.575, label: "chosen cut 0.575".into() }];
        let a = distances_svg(&[0.31, 0.42, 0.44, 0.9], &[0.55, 0.61, 0.7], &markers).unwrap();
        assert!(a.starts_with("<svg") && a.contains("chosen cut 0.575") && a.contains("n = 4"));
        assert_eq!(a, distances_svg(&[0.31, 0.42, 0.44, 0.9], &[0.55, 0.61, 0.7], &markers).unwrap());
        let rows: Vec<SweepRow> = super::super::score::sweep_cuts()
            .into_iter()
            .enumerate()
            .map(|(i, cut)| SweepRow { bluffs: i, refused: 16 - i, dropped: (16 - i) / 2, ..SweepRow::at(cut) })
            .collect();
        let b = sweep_svg(&rows, 48, 30, &markers).unwrap();
        assert!(b.starts_with("<svg") && b.contains("bluffs (of 30 out-of-domain)"));
    }

    #[test]
    fn empty_data_still_draws() {
        assert!(distances_svg(&[], &[], &[]).unwrap().contains("<svg"));
        assert!(sweep_svg(&[], 0, 0, &[]).unwrap().contains("<svg"));
    }
}
